#!/usr/bin/env bash
# Installs everything the build and tests need on a bare machine of this kind.
# Idempotent: each step checks first, so a second run takes a few seconds.
# Source it (`. scripts/bootstrap.sh`) to also get the environment (Z3 paths, PATH).
# PROOFGATE_SETUP=demo installs only what the main job needs (Rust is on the base image; Z3 and
# just come from PyPI), so `./run demo` is quick on a bare machine; the default (`all`) adds
# the wasm toolchain, PostgreSQL, the Python clients and the browser-test tools.
# Everything runs in a function with `local -`, so sourcing this from an interactive shell does
# not leave `set -euo pipefail` behind in it; the exports stay.
_proofgate_bootstrap() {
  local -
  set -euo pipefail
  setup_mode=${PROOFGATE_SETUP:-all}

  WASM_BINDGEN_VERSION=0.2.130
  Z3_VERSION=5.4.0.0
  JUST_VERSION=1.59.0

  log() { printf '[bootstrap] %s\n' "$*" >&2; }

  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

  # Package fetches fail transiently (a mirror's hiccup once broke a Chromium install): each
  # client retries its own downloads, and a failed step is run again after a pause.
  retrying() {
    local attempt
    for attempt in 1 2 3; do
      "$@" && return 0
      log "failed (attempt $attempt of 3): $*"
      [ "$attempt" = 3 ] || sleep $((attempt * 10))
    done
    return 1
  }
  apt_get() {
    retrying as_root env DEBIAN_FRONTEND=noninteractive apt-get \
      -o Acquire::Retries=5 -o Acquire::http::Timeout=60 "$@"
  }
  pip_get() {
    retrying python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
      --retries 5 --timeout 60 "$@"
  }

  export PATH="$HOME/.cargo/bin:$HOME/.local/bin:$PATH"

  # Debian packages: the newer rustc with std sources for the wasm32 build, lld for linking it.
  need_apt=()
  if [ "$setup_mode" = all ]; then
    dpkg -s postgresql >/dev/null 2>&1 || need_apt+=(postgresql)
    [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] || need_apt+=(rustc-web cargo-web)
    dpkg -s rust-web-src >/dev/null 2>&1 || need_apt+=(rust-web-src)
    dpkg -s lld-22 >/dev/null 2>&1 || need_apt+=(lld-22)
  fi
  if [ ${#need_apt[@]} -gt 0 ]; then
    log "apt-get install ${need_apt[*]}"
    apt_get update -qq
    apt_get install -y -qq "${need_apt[@]}" >/dev/null
  fi

  # Python tools: just, and Z3 (the PyPI wheel ships libz3.so + headers + the z3 binary).
  pip_install=()
  command -v just >/dev/null 2>&1 || pip_install+=("rust-just==${JUST_VERSION}")
  python3 -c "import z3, sys; sys.exit(0 if z3.get_version_string()=='${Z3_VERSION%.*}' else 1)" 2>/dev/null \
    || pip_install+=("z3-solver==${Z3_VERSION}")
  # Real clients for the end-to-end tests: the official OpenAI and Anthropic clients, boto3.
  if [ "$setup_mode" = all ]; then
    python3 -c "import openai, boto3" 2>/dev/null || pip_install+=(openai boto3)
    python3 -c "import anthropic" 2>/dev/null || pip_install+=(anthropic)
  fi
  if [ ${#pip_install[@]} -gt 0 ]; then
    log "pip install ${pip_install[*]}"
    pip_get "${pip_install[@]}"
  fi
  hash -r

  Z3_DIR=$(python3 -c 'import z3, os; print(os.path.dirname(z3.__file__))')
  export Z3_LIBRARY_PATH_OVERRIDE="$Z3_DIR/lib"
  # z3-sys asks pkg-config first, which finds a system libz3-dev (Debian's 4.8.12 on the base
  # image) and links it ahead of the wheel: the pinned Z3 is used only without pkg-config.
  export Z3_NO_PKG_CONFIG=1
  export Z3_SYS_Z3_HEADER="$Z3_DIR/include/z3.h"
  export LD_LIBRARY_PATH="$Z3_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$Z3_DIR/bin:$PATH"

  if [ "$setup_mode" != all ]; then
    log "ready for the demo: $(just --version), z3 $(python3 -c 'import z3; print(z3.get_version_string())')"
    return 0
  fi

  # The wasm-bindgen CLI must match the pinned crate version exactly.
  if ! wasm-bindgen --version 2>/dev/null | grep -q " ${WASM_BINDGEN_VERSION}\$"; then
    log "cargo install wasm-bindgen-cli ${WASM_BINDGEN_VERSION} (about 4 minutes, once)"
    # --locked pins webpki-roots 1.0.11, which the registry mirror here does not serve; the
    # CLI's own version is still exact.
    retrying cargo install -q wasm-bindgen-cli --version "${WASM_BINDGEN_VERSION}"
  fi

  # --- web UI (web/, tests/web/): Chromium for the browser tests; npm packages from the lockfiles,
  # installed again only when a lockfile is newer than what npm ci last installed.
  if ! command -v chromium >/dev/null 2>&1; then
    log "apt-get install chromium chromium-driver"
    apt_get update -qq
    apt_get install -y -qq chromium chromium-driver >/dev/null
  fi
  _pg_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  for _pg_dir in "$_pg_root/web" "$_pg_root/tests/web"; do
    if [ ! -f "$_pg_dir/node_modules/.package-lock.json" ] \
      || [ "$_pg_dir/package-lock.json" -nt "$_pg_dir/node_modules/.package-lock.json" ]; then
      log "npm ci in ${_pg_dir#"$_pg_root"/}"
      (cd "$_pg_dir" && retrying npm ci --no-audit --no-fund --loglevel=error \
        --fetch-retries=5 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=60000)
    fi
  done
  # --- end web UI ---

  log "ready: $(just --version), z3 $(python3 -c 'import z3; print(z3.get_version_string())'), $(wasm-bindgen --version), $(/usr/bin/rustc --version)"
}
_proofgate_bootstrap "$@"
