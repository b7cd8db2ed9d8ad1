// Builds the page into web/dist: one bundled script (the app, the `proofgate` wasm package
// with its .wasm embedded, z3-solver's browser wrapper), the HTML and CSS, and z3-solver's
// Emscripten files, which must stay separate files (its threads load z3-built.js by URL).
//   node build.mjs            (needs crates/wasm/pkg: `just wasm`)
import { build } from 'esbuild';
import { copyFile, mkdir, rm, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const pkgDir = path.join(here, '..', 'crates', 'wasm', 'pkg', 'web');
const pkg = path.join(pkgDir, 'proofgate.js');
const z3 = path.join(here, 'node_modules', 'z3-solver', 'build');

try {
  await stat(pkg);
} catch {
  console.error(`missing ${pkg}: build the npm package first (just wasm)`);
  process.exit(1);
}

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });

const common = {
  bundle: true,
  // A classic script, so the verifier also works when index.html is opened from disk.
  format: 'iife',
  target: 'es2022',
  alias: { proofgate: pkg, 'proofgate-wasm': path.join(pkgDir, 'proofgate_bg.wasm') },
  // The wasm is embedded: no fetch needed, which file:// pages cannot do.
  loader: { '.wasm': 'binary' },
  // z3-solver's browser entry reads `global.initZ3`.
  define: { global: 'globalThis' },
  logOverride: { 'empty-import-meta': 'silent' },
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'warning',
};
await build({ ...common, entryPoints: [path.join(here, 'src', 'main.js')], outfile: path.join(dist, 'app.js') });
// Z3 runs in its own worker so that the page never blocks on the solver's threads.
await build({ ...common, entryPoints: [path.join(here, 'src', 'z3-worker.js')], outfile: path.join(dist, 'z3-worker.js') });

for (const f of ['index.html', 'app.css']) await copyFile(path.join(here, 'src', f), path.join(dist, f));
for (const f of ['z3-built.js', 'z3-built.wasm']) await copyFile(path.join(z3, f), path.join(dist, f));
console.log(`built ${path.relative(process.cwd(), dist) || dist}`);
