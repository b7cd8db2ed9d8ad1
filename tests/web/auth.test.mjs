// API keys in the page, in headless Chromium: with keys required the page asks for one, refuses
// a wrong one, shows what a chat+read key allows, keeps it in the tab only, and forgets it;
// with `auth.required = false` it needs none. Screenshots: test-output/web/auth/, .../open/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { start, newPage, shot } from './harness.mjs';

const Q1 = 'I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?';
const DESKTOP = { width: 1280, height: 800 };

let env;
let chatKey;

before(async () => {
  env = await start({ auth: true, shotsSubdir: 'auth' });
  const res = await fetch(`${env.url}/api/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${env.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'web', scopes: ['chat', 'read'] }),
  });
  assert.equal(res.status, 201);
  chatKey = (await res.json()).key;
});

after(async () => {
  await env?.stop();
});

function serverErrors(p) {
  // 401s are expected here (the page learns that it needs a key); nothing else may fail.
  return p.problems.filter((x) => !/^HTTP 401 /.test(x));
}

test('the page asks for a key, refuses a wrong one and shows what a chat+read key allows', async () => {
  const page = await newPage(env, DESKTOP, [env.url]);
  await page.goto(`${env.url}/`);
  await page.waitForSelector('body[data-ready]');
  const needed = page.locator('[data-testid=key-needed]');
  await needed.waitFor();
  assert.match(await needed.textContent(), /API key/);
  assert.equal(await page.locator('#key-status [data-key=missing]').count(), 1);
  await shot(page, 'key-needed');

  await page.fill('#api-key', 'pg_not-a-real-key');
  await page.click('[data-action=use-key]');
  await page.locator('.key-form .error', { hasText: 'not valid' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('proofgate.apiKey')), null, 'a wrong key is not kept');

  await page.fill('#api-key', chatKey);
  await page.click('[data-action=use-key]');
  const scopes = page.locator('[data-testid=scopes]');
  await scopes.waitFor();
  const allowed = await scopes.locator('li').evaluateAll((lis) => lis.map((li) => [li.dataset.scope, li.dataset.allowed]));
  assert.deepEqual(allowed, [['chat', 'true'], ['read', 'true'], ['admin', 'false']]);
  assert.match(await page.locator('#key-status').textContent(), /Key: web \(chat, read\)/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('proofgate.apiKey')), chatKey, 'kept in the tab');
  assert.equal(await page.evaluate(() => localStorage.length), 0, 'never in local storage');
  await shot(page, 'key-scopes');

  // The chat works with it: a question gets a final answer.
  await page.goto(`${env.url}/#/chat`);
  await page.fill('#question', Q1);
  await page.click('[data-action=ask]');
  await page.locator('[data-testid=final-answer]').waitFor({ timeout: 90_000 });
  assert.equal(await page.locator('.thread-list li').count(), 1, 'the key sees its own thread');
  await shot(page, 'key-chat');

  // Linting on the server needs admin: the page says so instead of failing.
  await page.goto(`${env.url}/#/policy`);
  await page.locator('[data-lint=needs-admin]').waitFor();
  await shot(page, 'key-policy-needs-admin');

  // Another tab (a new context) does not have the key.
  const other = await newPage(env, DESKTOP, [env.url]);
  await other.goto(`${env.url}/#/chat`);
  await other.waitForSelector('body[data-ready]');
  await other.locator('[data-testid=key-needed]').waitFor();
  await other.context().close();

  // Forgetting the key asks again.
  await page.goto(`${env.url}/#/key`);
  await page.click('[data-action=forget-key]');
  await page.goto(`${env.url}/#/chat`);
  await page.locator('[data-testid=key-needed]').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('proofgate.apiKey')), null);
  assert.deepEqual(serverErrors(page), []);
  await page.context().close();
});

test('an admin key may lint on the server', async () => {
  const page = await newPage(env, DESKTOP, [env.url]);
  await page.goto(`${env.url}/#/key`);
  await page.waitForSelector('body[data-ready]');
  await page.fill('#api-key', env.adminKey);
  await page.click('[data-action=use-key]');
  await page.locator('[data-testid=scopes] li[data-scope=admin][data-allowed=true]').waitFor();
  await page.goto(`${env.url}/#/policy`);
  await page.locator('.lint [data-lint=clean], .lint .lint-issues').first().waitFor({ timeout: 60_000 });
  assert.equal(await page.locator('[data-lint=needs-admin]').count(), 0);
  assert.deepEqual(serverErrors(page), []);
  await page.context().close();
});

test('with auth.required = false the page needs no key', async () => {
  const open = await start({ auth: false, shotsSubdir: 'open' });
  try {
    const page = await newPage(open, DESKTOP, [open.url]);
    await page.goto(`${open.url}/`);
    await page.waitForSelector('body[data-ready]');
    await page.locator('#question').waitFor();
    assert.equal(await page.locator('#key-status [data-key=open]').count(), 1);
    assert.equal(await page.locator('[data-testid=key-needed]').count(), 0);
    await shot(page, 'open-no-key');
    assert.deepEqual(page.problems, []);
  } finally {
    await open.stop();
  }
});
