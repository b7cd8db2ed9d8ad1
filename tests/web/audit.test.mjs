// The audit verifier in headless Chromium against `proofgate serve` (issue 11): a genuine
// audit bundle passes with the signature, log inclusion and checks rebuilt from the policy;
// each tampering is flagged: the answer rewritten with the chain rebuilt, a stored check script
// changed or removed, the auditor's policy differing by one rule, and a log cut back after the
// auditor saved a checkpoint. A check that did not run (no policy, a plain trail instead of the
// bundle, no verifier key, Z3 unavailable) is never a pass: the outcome is "incomplete" and says
// what to do. Screenshots: test-output/web/audit/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { createRequire } from 'node:module';
import { start, newPage, shot, root } from './harness.mjs';

const require = createRequire(import.meta.url);
const { recordHash } = require(path.join(root, 'crates/wasm/pkg'));

const Q1 = 'I am 70 and visit in the low season without credits. What is my admission fee after the senior discount?';
const Z3_TIMEOUT = 180_000;
// Every final outcome, so that a wrong one fails at once instead of timing out.
const DONE = ['pass', 'fail', 'incomplete'].map((o) => `.verdict-box[data-outcome=${o}]`).join(', ');
let env;
let page;
let thread;
let bundle;

before(async () => {
  env = await start({ shotsSubdir: 'audit' });
  page = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  const res = await fetch(`${env.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: Q1 }] }),
  });
  const body = await res.json();
  assert.equal(body.proofgate.verdict, 'VALID');
  thread = body.proofgate.threadId;
  bundle = await (await fetch(`${env.url}/api/threads/${thread}/audit/bundle`)).json();
});

after(async () => { await env?.stop(); });

/** Re-hashes and re-links every record, as whoever holds the database could. */
function rebuildChain(trail) {
  for (let i = 0; i < trail.length; i++) {
    if (i > 0) trail[i].prev = trail[i - 1].hash;
    trail[i].hash = recordHash(JSON.stringify(trail[i]));
  }
  return trail;
}

async function verifyPasted(value) {
  await page.goto(`${env.url}/#/verify`);
  await page.waitForFunction(() => /Policy: /.test(document.querySelector('#policy-source')?.textContent || ''));
  await page.fill('#trail-text', JSON.stringify(value));
  await page.click('[data-action=verify-paste]');
  const box = page.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await page.waitForFunction(() => !document.querySelector('table.records .mark.pending'), null, { timeout: Z3_TIMEOUT });
  return box;
}

const validated = (trail) => trail.map((r) => r.kind).lastIndexOf('VALIDATED');

test('a genuine bundle passes: chain, replay, logic from the policy, signature, inclusion', async () => {
  await page.goto(`${env.url}/#/chat/${thread}`);
  await page.click(`[data-action=verify][href*="${thread}"]`);
  const box = page.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await page.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome !== 'pending', null, { timeout: Z3_TIMEOUT });
  assert.equal(await box.getAttribute('data-outcome'), 'pass', await box.textContent());
  assert.match(await box.locator('h3').textContent(), /^✓ Every record passes$/);
  assert.equal(await box.locator('[data-missing]').count(), 0, 'no check is missing');
  assert.equal(await box.getAttribute('role'), 'status');
  assert.match(await page.locator('[data-check=signature]').textContent(), /✓ Signature/);
  assert.match(await page.locator('[data-check=inclusion]').textContent(), /✓ Inclusion in the log: the head is leaf \d+/);
  assert.match(await page.locator('[data-check=logic]').textContent(), /confirmed by Z3 from your policy/);
  await shot(page, 'bundle-pass');
});

test('the answer rewritten and the chain rebuilt: the signature flags the last record', async () => {
  const forged = structuredClone(bundle);
  forged.trail = JSON.parse(JSON.stringify(forged.trail).replaceAll('$32.50', '$12.50'));
  rebuildChain(forged.trail);
  const box = await verifyPasted(forged);
  assert.equal(await box.getAttribute('data-outcome'), 'fail');
  assert.match(await page.locator('[data-check=signature]').textContent(), /✗ Signature: record \d+: .*altered/);
  const last = forged.trail.length - 1;
  assert.equal(await page.locator(`tr#rec-${last}.fail`).count(), 1);
  await shot(page, 'rewritten-answer-flagged');
});

test('a stored check script changed or removed: flagged at its record, and never run', async () => {
  const v = validated(bundle.trail);
  const changed = structuredClone(bundle);
  changed.trail[v].body.evidence.checks[0].checks[0].script = '(set-option :regular-output-channel "/tmp/x")(check-sat)';
  let box = await verifyPasted(changed);
  assert.equal(await box.getAttribute('data-outcome'), 'fail');
  assert.match(await page.locator('.first-failure').textContent(), new RegExp(`#${v} \\(VALIDATED\\)`));
  await shot(page, 'changed-script-flagged');

  const removed = structuredClone(bundle);
  delete removed.trail[v].body.evidence.checks;
  rebuildChain(removed.trail);
  box = await verifyPasted(removed);
  assert.equal(await box.getAttribute('data-outcome'), 'fail');
  assert.match(await page.locator('[data-check=signature]').textContent(), /✗ Signature/);
  // The logic is still confirmed: the checks come from the policy, not from the trail.
  assert.match(await page.locator(`#rec-${v} td:nth-child(5)`).textContent(), /Z3 agrees/);
  await shot(page, 'removed-scripts-flagged');
});

/** The outcome of a verification that nothing failed but that is not a full audit. */
async function expectIncomplete(p, missing) {
  const box = p.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await p.waitForFunction(() => !document.querySelector('table.records .mark.pending'), null, { timeout: Z3_TIMEOUT });
  const text = await box.textContent();
  assert.equal(await box.getAttribute('data-outcome'), 'incomplete', text);
  assert.doesNotMatch(text, /Every record passes/);
  assert.match(await box.locator('h3').textContent(), /^⚠ Not fully verified: /);
  // Not the green pass box, and still announced politely as a status.
  assert.equal(await box.getAttribute('class'), 'verdict-box incomplete');
  assert.equal(await box.getAttribute('role'), 'status');
  assert.deepEqual(await box.locator('[data-missing]').evaluateAll((els) => els.map((e) => e.dataset.missing)), missing, text);
  assert.equal(await p.locator('table.records tr.fail').count(), 0, 'no record fails');
  return box;
}

test('a bundle verified without the auditor\'s policy is incomplete, never a pass', async () => {
  // A server that offers no policy: the auditor has the key and the bundle, but no policy.
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  await p.context().route('**/api/policies', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: '{"policies":[]}' }));
  await p.goto(`${env.url}/#/verify`);
  await p.waitForFunction(() => /No policy loaded/.test(document.querySelector('#policy-source')?.textContent || '')
    && document.querySelector('#audit-key')?.value);
  await p.fill('#trail-text', JSON.stringify(bundle));
  await p.click('[data-action=verify-paste]');
  const box = await expectIncomplete(p, ['policy', 'thread']);
  assert.match(await box.locator('h3').textContent(), /logic was not re-checked \(no policy loaded\)/);
  assert.match(await box.locator('[data-missing=policy]').textContent(), /load your copy of the policy/);
  // The checks that did run are still shown.
  assert.match(await p.locator('[data-check=signature]').textContent(), /✓ Signature/);
  assert.match(await p.locator('[data-check=inclusion]').textContent(), /✓ Inclusion in the log/);
  await p.locator('.verdict-box').scrollIntoViewIfNeeded();
  await shot(p, 'bundle-without-policy-incomplete');
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('a plain trail (not the bundle) with the verifier key is incomplete: the signature was not checked', async () => {
  const box = await verifyPasted(bundle.trail);
  await expectIncomplete(page, ['thread', 'bundle']);
  assert.match(await box.locator('h3').textContent(), /signature and log inclusion were not checked \(a plain trail, not an audit bundle\)/);
  assert.match(await box.locator('[data-missing=bundle]').textContent(), /load the audit bundle/);
  assert.doesNotMatch(await box.locator('[data-missing=bundle]').textContent(), /verifier key/, 'the key was given');
  // The logic did run: Z3 confirmed it from the policy.
  assert.match(await page.locator('[data-check=logic]').textContent(), /confirmed by Z3 from your policy/);
  await box.scrollIntoViewIfNeeded();
  await shot(page, 'plain-trail-with-key-incomplete');
});

test('Z3 unavailable (no cross-origin isolation): a bundle with the policy and the key is incomplete', async () => {
  const auditKey = (await (await fetch(`${env.url}/.well-known/proofgate/audit-key`)).text()).trim();
  const p = await newPage(env, { width: 1280, height: 900 }, [env.staticUrl]);
  await p.goto(`${env.staticUrl}/index.html#/verify`);
  await p.waitForSelector('body[data-ready]');
  assert.equal(await p.evaluate(() => crossOriginIsolated), false);
  await p.setInputFiles('#policy-file', path.join(root, 'examples/policies/park-admission.json'));
  await p.waitForFunction(() => /Policy: /.test(document.querySelector('#policy-source')?.textContent || ''));
  // First without the key: both the logic and the signature are missing.
  await p.fill('#trail-text', JSON.stringify(bundle));
  await p.click('[data-action=verify-paste]');
  let box = await expectIncomplete(p, ['z3', 'thread', 'key']);
  assert.match(await box.locator('[data-missing=key]').textContent(), /give the server's verifier key/);
  // With the key, the signature and inclusion pass, and only Z3 is missing.
  await p.fill('#audit-key', auditKey);
  await p.click('[data-action=verify-paste]');
  await p.waitForFunction(() => !document.querySelector('.verdict-box [data-missing=key]'));
  box = await expectIncomplete(p, ['z3', 'thread']);
  assert.match(await box.locator('h3').textContent(), /logic was not re-checked \(Z3 cannot run in this page\)/);
  assert.match(await box.locator('[data-missing=z3]').textContent(), /open the verifier where Z3 can run/);
  assert.match(await p.locator('[data-check=signature]').textContent(), /✓ Signature/);
  assert.match(await p.locator('[data-check=logic]').textContent(), /Logic not re-checked: Z3 is unavailable/);
  assert.ok(await p.locator('table.records .mark.skip', { hasText: 'Z3 unavailable' }).count() > 0);
  await p.locator('.verdict-box').scrollIntoViewIfNeeded();
  await shot(p, 'bundle-without-z3-incomplete');
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('the thread being audited: named by the URL or the auditor, another thread\'s genuine bundle fails', async () => {
  // A second genuine thread: its bundle is signed and logged, but it is not the first thread.
  const res = await fetch(`${env.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: Q1 }] }),
  });
  const other = (await res.json()).proofgate.threadId;
  assert.notEqual(other, thread);
  const otherBundle = await (await fetch(`${env.url}/api/threads/${other}/audit/bundle`)).text();
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  // A server that answers the first thread's bundle URL with the other thread's bundle.
  await p.context().route(`**/api/threads/${thread}/audit/bundle*`, (r) => r.fulfill({ status: 200, contentType: 'application/json', body: otherBundle }));
  await p.goto(`${env.url}/#/verify?url=${encodeURIComponent(`/api/threads/${thread}/audit/bundle`)}`);
  const box = p.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await p.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome !== 'pending', null, { timeout: Z3_TIMEOUT });
  assert.equal(await box.getAttribute('data-outcome'), 'fail', await box.textContent());
  assert.match(await box.locator('h3').textContent(), /Not the thread you are auditing/);
  assert.match(await p.locator('[data-check=thread]').textContent(), new RegExp(`✗ Thread: this is thread ${other}'s trail, not ${thread}'s`));
  // The signature and log inclusion themselves pass: the bundle is genuine, for another thread.
  assert.match(await p.locator('[data-check=signature]').textContent(), /✓ Signature/);
  await shot(p, 'another-threads-bundle-flagged');
  // The auditor names one thread and the URL another: that alone fails the audit.
  await p.goto(`${env.url}/#/verify?thread=${encodeURIComponent(other)}&url=${encodeURIComponent(`/api/threads/${other}/audit/bundle`.replace(other, thread))}`);
  await p.waitForFunction(() => /but the URL asked for/.test(document.querySelector('[data-check=thread]')?.textContent || ''), null, { timeout: Z3_TIMEOUT });
  assert.match(await p.locator('[data-check=thread]').textContent(), new RegExp(`you are auditing thread ${other}, but the URL asked for thread ${thread}'s trail`));
  await p.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome === 'fail', null, { timeout: Z3_TIMEOUT });
  // Pasted, the thread is not known: incomplete, naming the thread the trail is; the auditor
  // names it and the audit passes.
  await p.goto(`${env.url}/#/verify`);
  await p.waitForFunction(() => /Policy: /.test(document.querySelector('#policy-source')?.textContent || ''));
  await p.fill('#trail-text', otherBundle);
  await p.click('[data-action=verify-paste]');
  const incomplete = await expectIncomplete(p, ['thread']);
  assert.match(await incomplete.locator('[data-missing=thread]').textContent(), new RegExp(`thread ${other}'s`));
  await p.fill('#expected-thread', other);
  await p.click('[data-action=verify-paste]');
  await p.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome === 'pass', null, { timeout: Z3_TIMEOUT });
  assert.match(await p.locator('[data-check=thread]').textContent(), /✓ Thread: .*the one you are auditing/);
  await p.fill('#expected-thread', thread);
  await p.click('[data-action=verify-paste]');
  await p.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome === 'fail', null, { timeout: Z3_TIMEOUT });
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('the auditor\'s policy differs by one rule: the validation is flagged', async () => {
  const policy = JSON.parse(readFileSync(path.join(root, 'examples/policies/park-admission.json'), 'utf8'));
  policy.rules.pop();
  const file = path.join(env.work, 'park-changed.json');
  writeFileSync(file, JSON.stringify(policy));
  await page.goto(`${env.url}/#/verify`);
  await page.setInputFiles('#policy-file', file);
  await page.fill('#trail-text', JSON.stringify(bundle));
  await page.click('[data-action=verify-paste]');
  await page.locator('.verdict-box[data-outcome=fail]').waitFor({ timeout: Z3_TIMEOUT });
  const v = validated(bundle.trail);
  assert.match(await page.locator(`#rec-${v} .why`).textContent(), /auditor's policy/);
  await shot(page, 'other-policy-flagged');
});

test('a log cut back after the auditor saved a checkpoint: consistency fails', async () => {
  // The auditor saved a checkpoint of a larger log than the bundle's: as if the log had been
  // cut back to the bundle's size since. (The log grows by one thread here; the bundle is the
  // one taken before.)
  const res = await fetch(`${env.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: Q1 }] }),
  });
  assert.equal((await res.json()).proofgate.verdict, 'VALID');
  const saved = await (await fetch(`${env.url}/api/log/checkpoint`)).text();
  await page.goto(`${env.url}/#/verify`);
  await page.fill('#saved-checkpoint', saved);
  await page.fill('#trail-text', JSON.stringify(bundle));
  await page.click('[data-action=verify-paste]');
  await page.locator('.verdict-box[data-outcome=fail]').waitFor({ timeout: Z3_TIMEOUT });
  assert.match(await page.locator('[data-check=consistency]').textContent(), /✗ Consistency with your saved checkpoint: .*(shrank|rewritten)/);
  await shot(page, 'log-cut-back-flagged');
  assert.deepEqual(page.problems, []);

  // The operator really cuts the log back in the database: the server, which signed the larger
  // log, signs no checkpoint (nor bundle) of the smaller one, and says why. (Last: the server
  // serves no bundle after this.)
  const db = path.join(env.work, 'proofgate.sqlite');
  execFileSync('python3', ['-c', 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM log_leaves WHERE idx = (SELECT MAX(idx) FROM log_leaves)"); c.commit()', db]);
  const refused = await fetch(`${env.url}/api/threads/${thread}/audit/bundle`);
  assert.equal(refused.status, 500);
  assert.match(await refused.text(), /cut back/);
});
