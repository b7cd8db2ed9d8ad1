// The package's TypeScript declarations, compiled with `tsc --strict` against a driver written
// as an app writes one (types/usage.ts), for Node's entry and the browser's: a declaration that
// does not compile, or no longer fits how the package is used, fails here (they were checked
// by no test, and hand-written beside the Rust).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
// TypeScript is one of the test tools tests/web/package.json pins (scripts/bootstrap.sh
// installs them).
const tsc = path.join(root, 'tests/web/node_modules/typescript/bin/tsc');

for (const [entry, project] of [['node', 'tsconfig.json'], ['web', 'tsconfig.web.json']]) {
  test(`the ${entry} entry's declarations compile with a driver that uses them (tsc --strict)`, () => {
    assert.ok(existsSync(tsc), `${tsc} is missing: run scripts/bootstrap.sh (npm ci in tests/web)`);
    try {
      execFileSync(process.execPath, [tsc, '-p', path.join(here, 'types', project)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
    } catch (e) {
      assert.fail(`tsc found errors:\n${e.stdout}${e.stderr}`);
    }
  });
}
