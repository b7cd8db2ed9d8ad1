// Starts what the browser tests need: the scripted LLM (recorded replies), `proofgate serve`
// with the demo configuration and its own SQLite file, a plain static server over web/dist
// (no COOP/COEP, like any static host), and headless Debian Chromium.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, readdirSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const dist = path.join(root, 'web', 'dist');
export const shots = path.join(root, 'test-output', 'web');
let shotDir = shots;

function waitForLine(child, pattern, what, timeoutMs = 60000) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start within ${timeoutMs} ms:\n${seen}`)), timeoutMs);
    const onData = (d) => {
      seen += d.toString();
      const m = pattern.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d) => { seen += d.toString(); });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${what} exited (${code}):\n${seen}`)); });
  });
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.map': 'application/json' };

/** A static file server over `dir` without any cross-origin isolation headers. */
function staticServer(dir) {
  const server = createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    const file = path.resolve(dir, rel);
    if (!file.startsWith(dir) || !existsSync(file)) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * Starts everything. `auth: false` (default) runs the server with `auth.required = false`, as
 * for local development; `auth: true` requires API keys, with `adminKey` as the admin key.
 * Screenshots go to test-output/web/ (or its `shotsSubdir`), replacing the previous run's
 * (`keepShots` keeps them: a second server in the same test file).
 * With `guardrailRules` (tests/support/scripted_guardrail.py's rules), answers are validated by
 * the Amazon Bedrock validator against that scripted ApplyGuardrail server.
 */
export async function start({ auth = false, shotsSubdir = null, guardrailRules = null, keepShots = false } = {}) {
  if (!existsSync(path.join(dist, 'index.html'))) throw new Error('web/dist is missing: run `just web` first');
  const bin = process.env.PROOFGATE_BIN || path.join(process.env.CARGO_TARGET_DIR || path.join(root, 'target'), 'debug', 'proofgate');
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run \`cargo build -p proofgate-proxy\``);
  shotDir = shotsSubdir ? path.join(shots, shotsSubdir) : shots;
  mkdirSync(shotDir, { recursive: true });
  if (!keepShots) for (const f of readdirSync(shotDir)) if (f.endsWith('.png')) rmSync(path.join(shotDir, f));
  const work = mkdtempSync(path.join(tmpdir(), 'proofgate-web-'));
  const children = [];

  const llm = spawn('python3', [path.join(root, 'tests/support/scripted_llm.py'), path.join(root, 'examples/demo/recorded-llm.json')],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(llm);
  const [, llmPort] = await waitForLine(llm, /listening on (\d+)/, 'scripted LLM');

  let validator = {};
  if (guardrailRules) {
    const script = path.join(work, 'guardrail.json');
    writeFileSync(script, JSON.stringify({ rules: guardrailRules }));
    const guardrail = spawn('python3', [path.join(root, 'tests/support/scripted_guardrail.py'), script],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(guardrail);
    const [, port] = await waitForLine(guardrail, /listening on (\d+)/, 'scripted guardrail');
    validator = {
      PROOFGATE_VALIDATOR__KIND: 'bedrock',
      PROOFGATE_VALIDATOR__BEDROCK__GUARDRAIL_ID: 'gr-web',
      PROOFGATE_VALIDATOR__BEDROCK__GUARDRAIL_VERSION: '1',
      PROOFGATE_VALIDATOR__BEDROCK__REGION: 'us-east-1',
      PROOFGATE_VALIDATOR__BEDROCK__ENDPOINT_URL: `http://127.0.0.1:${port}`,
      AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'secret',
    };
  }

  const adminKey = `pg-web-admin-${randomBytes(16).toString('hex')}`;
  const env = {
    ...process.env,
    ...validator,
    PROOFGATE_AUTH__REQUIRED: auth ? 'true' : 'false',
    PROOFGATE_AUTH__ADMIN_KEY: adminKey,
    PROOFGATE_UPSTREAM__BASE_URL: `http://127.0.0.1:${llmPort}/v1`,
    PROOFGATE_REWRITER__BASE_URL: `http://127.0.0.1:${llmPort}/v1`,
    PROOFGATE_STORAGE__URL: `sqlite://${work}/proofgate.sqlite`,
    RUST_LOG: process.env.RUST_LOG || 'warn',
  };
  const pg = spawn(bin, ['serve', '--config', 'examples/demo/proofgate.toml', '--listen', '127.0.0.1:0'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(pg);
  const [, url] = await waitForLine(pg, /proofgate listening on (http:\/\/\S+)/, 'proofgate serve');

  const statik = await staticServer(dist);
  const staticUrl = `http://127.0.0.1:${statik.address().port}`;

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });

  return {
    url: url.replace(/\/$/, ''),
    adminKey,
    staticUrl,
    work,
    browser,
    async stop() {
      await browser.close().catch(() => {});
      statik.close();
      for (const c of children) c.kill('SIGTERM');
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** A page that records failed requests, page errors and any request leaving the given origins. */
export async function newPage(env, viewport, origins) {
  const context = await env.browser.newContext({ viewport, acceptDownloads: false });
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  // Anything the page's Content-Security-Policy refused is a problem too.
  page.on('console', (m) => {
    if (/Content.Security.Policy/i.test(m.text())) page.problems.push(`CSP: ${m.text()}`);
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!origins.some((o) => u.startsWith(o)) && !/^(data|blob|file):/.test(u)) page.problems.push(`external request: ${u}`);
  });
  page.on('response', (r) => { if (r.status() >= 500) page.problems.push(`HTTP ${r.status()} ${r.url()}`); });
  return page;
}

let n = 0;
export async function shot(page, name, opts = {}) {
  n += 1;
  const file = path.join(shotDir, `${String(n).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, ...opts });
  return file;
}
