// The audit verifier in headless Chromium against `proofgate serve` (issue 11): a genuine
// audit bundle passes with the signature, log inclusion and checks rebuilt from the policy;
// each tampering is flagged: the answer rewritten with the chain rebuilt, a stored check script
// changed or removed, the auditor's policy differing by one rule, and a log cut back after the
// auditor saved a checkpoint. Screenshots: test-output/web/audit/.
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
  const box = page.locator('.verdict-box[data-outcome=pass], .verdict-box[data-outcome=fail]');
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await page.waitForFunction(() => !document.querySelector('table.records .mark.pending'), null, { timeout: Z3_TIMEOUT });
  return box;
}

const validated = (trail) => trail.map((r) => r.kind).lastIndexOf('VALIDATED');

test('a genuine bundle passes: chain, replay, logic from the policy, signature, inclusion', async () => {
  await page.goto(`${env.url}/#/chat/${thread}`);
  await page.click(`[data-action=verify][href*="${thread}"]`);
  const box = page.locator('.verdict-box[data-outcome=pass], .verdict-box[data-outcome=fail]');
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await page.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome !== 'pending', null, { timeout: Z3_TIMEOUT });
  assert.equal(await box.getAttribute('data-outcome'), 'pass', await box.textContent());
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
  // Save a checkpoint, then let the operator delete the newest leaf.
  const saved = await (await fetch(`${env.url}/api/log/checkpoint`)).text();
  const db = path.join(env.work, 'proofgate.sqlite');
  execFileSync('python3', ['-c', 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM log_leaves WHERE idx = (SELECT MAX(idx) FROM log_leaves)"); c.commit()', db]);
  const cut = await (await fetch(`${env.url}/api/threads/${thread}/audit/bundle`)).json();
  await page.goto(`${env.url}/#/verify`);
  await page.fill('#saved-checkpoint', saved);
  await page.fill('#trail-text', JSON.stringify(cut));
  await page.click('[data-action=verify-paste]');
  await page.locator('.verdict-box[data-outcome=fail]').waitFor({ timeout: Z3_TIMEOUT });
  assert.match(await page.locator('[data-check=consistency]').textContent(), /✗ Consistency with your saved checkpoint: .*(shrank|rewritten)/);
  await shot(page, 'log-cut-back-flagged');
  assert.deepEqual(page.problems, []);
});
