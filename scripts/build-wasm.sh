#!/usr/bin/env bash
# Builds the npm package `proofgate` from crates/wasm.
#   scripts/build-wasm.sh [TARGET_DIR] [PKG_DIR]
# There is no prebuilt wasm32 std for the rustup toolchain here, so the std is built from
# source with Debian's rustc (see ../shared/TOOLCHAIN.md), in its own target dir.
set -euo pipefail
target_dir=${1:-target/wasm}
pkg_dir=${2:-crates/wasm/pkg}
cd "$(dirname "$0")/.."

RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build --quiet --profile wasm \
  --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
  --target-dir "$target_dir" -p proofgate-wasm
wasm="$target_dir/wasm32-unknown-unknown/wasm/proofgate_wasm.wasm"

# Binaryen's optimizer, from web/'s npm packages (scripts/bootstrap.sh installs them).
wasm_opt=web/node_modules/binaryen/bin/wasm-opt
if [ ! -f "$wasm_opt" ]; then
  echo "build-wasm: $wasm_opt is missing: run 'npm ci' in web/ (scripts/bootstrap.sh does)" >&2
  exit 1
fi

rm -rf "$pkg_dir"
mkdir -p "$pkg_dir"
pkg_abs=$(cd "$pkg_dir" && pwd)
# Node (CommonJS; ESM `import` goes through a thin wrapper) and browsers (ES module + init()).
wasm-bindgen --remove-name-section --remove-producers-section --target nodejs --out-name proofgate --out-dir "$pkg_dir/node" "$wasm"
wasm-bindgen --remove-name-section --remove-producers-section --target web --out-name proofgate --out-dir "$pkg_dir/web" "$wasm"
# Both targets load the same WebAssembly: optimized once (replay in Node about 7% faster than
# rustc's own -O3 output; about 30 s), then shared.
if ! cmp -s "$pkg_dir/node/proofgate_bg.wasm" "$pkg_dir/web/proofgate_bg.wasm"; then
  echo "build-wasm: wasm-bindgen wrote different WebAssembly for Node and browsers; optimize each" >&2
  exit 1
fi
node "$wasm_opt" -O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  "$pkg_dir/node/proofgate_bg.wasm" -o "$pkg_dir/node/proofgate_bg.wasm"
cp "$pkg_dir/node/proofgate_bg.wasm" "$pkg_dir/web/proofgate_bg.wasm"

# Named ESM exports, generated from the CommonJS module's own export list.
node -e '
const names = Object.keys(require(process.argv[1])).filter(n => n !== "__esModule" && !n.startsWith("__wbg"));
const lines = ["import pkg from \"./proofgate.js\";", "export default pkg;"];
for (const n of names) lines.push(`export const ${n} = pkg.${n};`);
require("fs").writeFileSync(process.argv[2], lines.join("\n") + "\n");
' "$pkg_abs/node/proofgate.js" "$pkg_dir/node/proofgate.mjs"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cat > "$pkg_dir/package.json" <<JSON
{
  "name": "proofgate",
  "version": "$version",
  "description": "proofgate core in WebAssembly: findings priority, verdicts, decision parsing, the rewriting loop and audit replay",
  "license": "Apache-2.0",
  "main": "./node/proofgate.js",
  "module": "./web/proofgate.js",
  "types": "./node/proofgate.d.ts",
  "exports": {
    ".": {
      "types": "./node/proofgate.d.ts",
      "browser": "./web/proofgate.js",
      "node": {
        "import": "./node/proofgate.mjs",
        "require": "./node/proofgate.js"
      },
      "default": "./web/proofgate.js"
    },
    "./web": {
      "types": "./web/proofgate.d.ts",
      "default": "./web/proofgate.js"
    }
  },
  "files": ["node", "web", "README.md"]
}
JSON
# The package's own README (argument rules, limits, refused findings): npm shows it.
cp crates/wasm/README.md "$pkg_dir/README.md"
# Lets the package's own tests (and examples) import it by name, as users will.
mkdir -p crates/wasm/node_modules
ln -sfn ../pkg crates/wasm/node_modules/proofgate
echo "built npm package in $pkg_dir ($(du -k "$pkg_dir/web/proofgate_bg.wasm" | cut -f1) KiB of WebAssembly)"
