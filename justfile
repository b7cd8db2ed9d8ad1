# proofgate tasks. On a bare machine use ./run <recipe>, which installs the toolchain first.

set shell := ["bash", "-euo", "pipefail", "-c"]

wasm_target_dir := "target/wasm"
pkg_dir := "crates/wasm/pkg"

# The main job: what proofgate does, end to end, on the shipped examples. A debug build
# without the AWS SDK (the demo runs the local reasoner), which compiles in a fraction of the
# time of a full release build.
demo:
    cargo build -p proofgate-proxy --no-default-features
    scripts/demo.sh

# Every test: lints, Rust (unit, property, integration), the wasm build and the npm package's
# tests, the web UI in headless Chromium, and the main job (`./run demo`) end to end, which
# nothing else runs (its script reads the proxy's replies as a client would).
test: lint test-rust test-node test-web demo

# Native build of the workspace (the `proofgate` binary).
build:
    cargo build --release -p proofgate-proxy

# Rust unit, property and integration tests (storage tests also against a throwaway PostgreSQL).
test-rust:
    scripts/with-postgres.sh cargo test --workspace --all-targets --no-fail-fast

# Formatting and clippy, warnings as errors.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Build the npm package `proofgate` into crates/wasm/pkg (Node: require and import; browsers: ESM).
wasm:
    scripts/build-wasm.sh {{wasm_target_dir}} {{pkg_dir}}

# Node tests of the npm package.
test-node: wasm
    node --test crates/wasm/tests/ < /dev/null

# Benchmarks of the local reasoner (prints figures).
bench-reasoner:
    cargo bench -p proofgate-reasoner

# What the proxy adds: overhead per request and memory (prints figures).
bench-proxy:
    cargo bench -p proofgate-proxy --bench overhead

# What durable audit writes cost: one step on SQLite with synchronous=FULL vs NORMAL.
bench-durability:
    cargo bench -p proofgate-proxy --bench durability

# Audit replay in Node through the npm package (records per second).
bench-replay: wasm
    cd crates/wasm && node bench/replay.mjs

# The side-by-side proxy tables are `just bench-side-by-side` and `just bench-distinct` (nginx,
# wrk, optionally LiteLLM).
# Every figure of issue 15 but the side-by-side tables (a few minutes).
bench: bench-reasoner bench-proxy bench-durability bench-replay

# Direct to nginx, proofgate with both validators and LiteLLM (the venv `just litellm-venv`
# made, or LITELLM_VENV), in one run, then issue 15's ratios within it.
# The side-by-side table (needs nginx and wrk).
bench-side-by-side seconds="5":
    cargo build --release -p proofgate-proxy --bin proofgate
    bench/side-by-side.sh {{seconds}}

# From PyPI, about two minutes the first time; `bench/side-by-side.sh` uses it when it exists.
# LiteLLM's proxy, at the version issue 15 measured, for the side-by-side table.
litellm-venv version="1.106.2":
    #!/usr/bin/env bash
    set -euo pipefail
    venv="$HOME/.cache/litellm-venv"
    if [ "$("$venv/bin/python" -m pip show litellm 2>/dev/null | awk '/^Version:/{print $2}')" = "{{version}}" ]; then
      echo "LiteLLM {{version}} is in $venv"; exit 0
    fi
    if [ -e "$venv" ]; then
      echo "replacing $venv (it does not hold LiteLLM {{version}})"
      rm -rf "$venv"
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'litellm[proxy]=={{version}}'
    echo "LiteLLM {{version}} installed in $venv"

# The local validator with every question distinct, beside the Bedrock path (needs nginx, wrk).
bench-distinct seconds="5":
    cargo build --release -p proofgate-proxy --example echo_translator --bin proofgate
    bench/distinct-questions.sh {{seconds}}

# Build the page (chat, debug panel, proof view, audit verifier, policy viewer) into web/dist,
# which `proofgate serve` serves at / (server.web_dir).
web: wasm
    cd web && node build.mjs

# End-to-end tests of the page in headless Chromium against `proofgate serve` and a scripted
# LLM; screenshots of every step in test-output/web/.
test-web: web
    # The binary as `cargo test --workspace` builds it (same features: nothing is rebuilt
    # after test-rust).
    cargo test --workspace --all-targets --no-run
    node --test --test-concurrency=1 tests/web/ < /dev/null
