// The audit verifier in headless Chromium against `proofgate serve` (issue 11): a genuine
// audit bundle passes with the signature, log inclusion and checks rebuilt from the policy;
// each tampering is flagged: the answer rewritten with the chain rebuilt, a stored check script
// changed or removed, the auditor's policy differing by one rule, and a log cut back after the
// auditor saved a checkpoint. A check that did not run (no policy, a plain trail instead of the
// bundle, no verifier key, Z3 unavailable), or ran with the policy or key the audited server
// serves, or a trail in an older audit format, is never a pass: the outcome is "incomplete" and
// says what to do. Screenshots: test-output/web/audit/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
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
// The answer the chat completion released to the app.
let released;
let bundle;
// The verifier key as the auditor holds it: fetched here, outside the page under test, as an
// auditor obtains it out of band.
let auditKey;
// A log checkpoint the auditor saved before the audits (bundles are fetched with a consistency
// proof from its size, as the page asks for one).
let savedCheckpoint;
let savedSize;
const POLICY = path.join(root, 'examples/policies/park-admission.json');

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
  released = body.choices[0].message.content;
  savedCheckpoint = await (await fetch(`${env.url}/api/log/checkpoint`)).text();
  savedSize = Number(savedCheckpoint.split('\n')[1]);
  bundle = await (await fetch(`${env.url}/api/threads/${thread}/audit/bundle?from=${savedSize}`)).json();
  auditKey = (await (await fetch(`${env.url}/.well-known/proofgate/audit-key`)).text()).trim();
});

after(async () => { await env?.stop(); });

/**
 * The checkpoint the server signs now, as an auditor saves it once a thread is logged: only a
 * checkpoint that counts a trail's head anchors that trail.
 */
async function checkpointNow() {
  const text = await (await fetch(`${env.url}/api/log/checkpoint`)).text();
  return { text, size: Number(text.split('\n')[1]) };
}

/** Re-hashes and re-links every record, as whoever holds the database could. */
function rebuildChain(trail) {
  for (let i = 0; i < trail.length; i++) {
    if (i > 0) trail[i].prev = trail[i - 1].hash;
    trail[i].hash = recordHash(JSON.stringify(trail[i]));
  }
  return trail;
}

/**
 * The auditor loads their own copy of the policy, and pastes the verifier key they hold and a
 * log checkpoint they saved.
 */
async function bringOwn(p, key = auditKey, checkpoint = savedCheckpoint) {
  await p.waitForSelector('#policy-source');
  // Loading the policy re-verifies what is shown: wait until that run has started, so that it
  // cannot start after (and supersede) the verification the test asks for next.
  if (!/park-admission\.json \(your copy\)/.test(await p.locator('#policy-source').textContent())) {
    await p.setInputFiles('#policy-file', POLICY);
    await p.waitForFunction(() => /park-admission\.json \(your copy\)/.test(document.querySelector('#policy-source').textContent));
  }
  await pasteKey(p, key);
  await p.fill('#saved-checkpoint', checkpoint);
}

/** The auditor clears the key field and pastes the key they hold. */
async function pasteKey(p, key) {
  await p.fill('#audit-key', '');
  await p.fill('#audit-key', key);
}

/** Clicks `selector` and waits for the verification it starts (a new verdict box) to finish. */
async function rerun(p, selector) {
  await p.evaluate(() => { window.previousBox = document.querySelector('.verdict-box'); });
  await p.click(selector);
  await p.waitForFunction(() => {
    const b = document.querySelector('.verdict-box');
    return b && b !== window.previousBox && b.dataset.outcome && b.dataset.outcome !== 'pending'
      && !document.querySelector('table.records .mark.pending');
  }, null, { timeout: Z3_TIMEOUT });
  return p.locator('.verdict-box');
}

async function verifyPasted(value) {
  await page.goto(`${env.url}/#/verify`);
  await bringOwn(page);
  await page.fill('#trail-text', JSON.stringify(value));
  await page.click('[data-action=verify-paste]');
  const box = page.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  await page.waitForFunction(() => !document.querySelector('table.records .mark.pending'), null, { timeout: Z3_TIMEOUT });
  return box;
}

const validated = (trail) => trail.map((r) => r.kind).lastIndexOf('VALIDATED');

test('the chat\'s verify link: the policy and key the audited server serves are its word, never a pass', async () => {
  await page.goto(`${env.url}/#/chat/${thread}`);
  await page.click(`[data-action=verify][href*="${thread}"]`);
  const box = await expectIncomplete(page, ['policy-served', 'key-served', 'checkpoint']);
  assert.match(await box.locator('h3').textContent(), /checked against the policy this server serves, not yours/);
  assert.match(await box.locator('[data-missing=policy-served]').textContent(), /load the policy file you hold/);
  assert.match(await box.locator('[data-missing=key-served]').textContent(), /paste the server's verifier key you hold \(obtained out of band/);
  // The checks still ran, and say with what.
  const logic = await page.locator('[data-check=logic]').textContent();
  assert.match(logic, /confirmed by Z3 from the policy this server serves/);
  assert.doesNotMatch(logic, /your policy/);
  assert.match(await page.locator('[data-check=signature]').textContent(), /✓ Signature: .*with the key this server serves/);
  assert.match(await page.locator('#policy-source').textContent(), /served by this server/);
  assert.match(await page.locator('#audit-key-source').textContent(), /Served by this server/);
  // The whole key's digest, to compare with the one the auditor holds.
  const digest = createHash('sha256').update(auditKey).digest('hex');
  assert.match(await page.locator('[data-check=key]').textContent(), new RegExp(`SHA-256 ${digest}`));
  await shot(page, 'bundle-served-inputs-incomplete');
  // A character typed and taken back, or the same key pasted over it, leaves the server's key
  // the server's (a review: any edit made it count as the auditor's).
  await page.focus('#audit-key');
  await page.keyboard.press('End');
  await page.keyboard.type('x');
  await page.keyboard.press('Backspace');
  await page.fill('#audit-key', auditKey);
  assert.match(await page.locator('#audit-key-source').textContent(), /Served by this server/);
  const again = await rerun(page, '[data-action=load-url]');
  assert.deepEqual(await again.locator('[data-missing]').evaluateAll((els) => els.map((e) => e.dataset.missing)), ['policy-served', 'key-served', 'checkpoint']);
});

test('a genuine bundle with the auditor\'s own policy and key passes: chain, replay, logic, signature, inclusion', async () => {
  // On the verifier the chat's link opened: the auditor brings their own policy and key.
  await bringOwn(page);
  const box = await rerun(page, '[data-action=load-url]');
  assert.equal(await box.getAttribute('data-outcome'), 'pass', await box.textContent());
  assert.match(await box.locator('h3').textContent(), /^✓ Every record passes$/);
  assert.equal(await box.locator('[data-missing]').count(), 0, 'no check is missing');
  assert.equal(await box.getAttribute('role'), 'status');
  assert.match(await page.locator('[data-check=format]').textContent(), /^Audit format \d+ \(the current format\)$/);
  assert.match(await page.locator('[data-check=signature]').textContent(), /✓ Signature/);
  assert.doesNotMatch(await page.locator('[data-check=signature]').textContent(), /this server serves/);
  assert.match(await page.locator('[data-check=inclusion]').textContent(), /✓ Inclusion in the log: the head is leaf \d+/);
  assert.match(await page.locator('[data-check=logic]').textContent(), /confirmed by Z3 from your policy/);
  assert.equal(await page.locator('#audit-key-source').textContent(), '');
  assert.match(await page.locator('#conn').textContent(), /^✓ Every record passes$/);
  assert.match(await page.locator('[data-check=consistency]').textContent(), /✓ Consistency with your saved checkpoint/);
  assert.match(await page.locator('[data-check=heads]').textContent(), /^✓ Latest head: no later head of this thread among the log's \d+ leaves, the log as the server signs it now /);
  // The checkpoint checked is offered for the next audit: the bundle's, signed.
  assert.equal(await page.locator('#checked-checkpoint').inputValue(), bundle.checkpoint);
  // What was verified, read from the replayed trail (not the server's copy in the chat).
  assert.equal(await page.locator('[data-check=question] q').textContent(), Q1);
  assert.equal(await page.locator('[data-check=answer] blockquote').textContent(), released);
  await shot(page, 'bundle-pass');
  // Without a saved checkpoint, a server holding its key could have rebuilt its whole log
  // around a rewritten trail: not a full audit.
  await page.fill('#saved-checkpoint', '');
  const without = await rerun(page, '[data-action=load-url]');
  assert.equal(await without.getAttribute('data-outcome'), 'incomplete', await without.textContent());
  assert.deepEqual(await without.locator('[data-missing]').evaluateAll((els) => els.map((e) => e.dataset.missing)), ['checkpoint']);
  assert.match(await without.locator('[data-missing=checkpoint]').textContent(), /paste a log checkpoint you saved before/);
  await page.fill('#saved-checkpoint', savedCheckpoint);
});

test('an answer the validator translated itself (Amazon Bedrock): its premises are the validator\'s word, never a pass', async () => {
  // The guardrail's VALID names a premise and a rule; nothing holds the premise to what the
  // user said (no translation is recorded), so however genuine the bundle, it is incomplete.
  const benv = await start({
    shotsSubdir: 'audit',
    keepShots: true,
    guardrailRules: [{
      match: 'senior age class',
      findings: [{ valid: { translation: { premises: [{ logic: '(= customerAge 70)', naturalLanguage: 'The visitor is 70' }], claims: [{ logic: '(= ageClass SENIOR)', naturalLanguage: 'the senior age class' }] }, supportingRules: [{ identifier: 'SENIORDEFINI' }] } }],
    }],
  });
  try {
    const res = await fetch(`${benv.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'I am 70 years old.' }, { role: 'assistant', content: 'Thanks, noted.' }, { role: 'user', content: 'Which age class am I in?' }] }),
    });
    const body = await res.json();
    assert.equal(body.proofgate?.verdict, 'VALID', JSON.stringify(body).slice(0, 400));
    const id = body.proofgate.threadId;
    const key = (await (await fetch(`${benv.url}/.well-known/proofgate/audit-key`)).text()).trim();
    const saved = await (await fetch(`${benv.url}/api/log/checkpoint`)).text();
    const p = await newPage(benv, { width: 1280, height: 900 }, [benv.url]);
    await p.goto(`${benv.url}/#/verify?thread=${encodeURIComponent(id)}&url=${encodeURIComponent(`/api/threads/${id}/audit/bundle`)}`);
    await bringOwn(p, key, saved);
    const box = await rerun(p, '[data-action=load-url]');
    assert.equal(await box.getAttribute('data-outcome'), 'incomplete', await box.textContent());
    assert.deepEqual(await box.locator('[data-missing]').evaluateAll((els) => els.map((e) => e.dataset.missing)), ['validator-premises']);
    assert.match(await box.locator('[data-missing=validator-premises]').textContent(), /translated them itself/);
    // Everything else held: the signature, the log, and Z3 on the findings as recorded.
    assert.match(await p.locator('[data-check=signature]').textContent(), /✓ Signature/);
    assert.match(await p.locator('[data-check=logic]').textContent(), /confirmed by Z3 from your policy/);
    await shot(p, 'bedrock-validator-incomplete');
    assert.deepEqual(p.problems, []);
    await p.context().close();
  } finally {
    await benv.stop();
  }
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
test('a genuine bundle of an earlier head of its thread is not a full audit: the log the server signs now holds a later head', async () => {
  // A server (or whoever holds its database) can hand out an earlier head of a thread: its
  // records, signed head and inclusion proof are all genuine. The page reads the log's public
  // leaves up to the checkpoint the server signs now, and finds the later head: the records
  // pass, and the audit is incomplete, saying where the thread went on.
  const post = (p, body) => fetch(`${env.url}${p}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const started = await (await post('/api/threads', {
    question: 'I am 70. How much will I pay in total for admission?', answer: 'As a senior you pay $35.75 including tax.',
  })).json();
  assert.equal(started.status, 'awaiting_input', JSON.stringify(started));
  const cp = await checkpointNow();
  const earlier = await (await fetch(`${env.url}/api/threads/${started.id}/audit/bundle?from=${cp.size}`)).json();
  const answered = await post(`/api/threads/${started.id}/answers`, { answers: ['Low season, and no credits.', 'No credits.'] });
  assert.equal(answered.status, 200, await answered.text());
  await page.goto(`${env.url}/#/verify`);
  await bringOwn(page, auditKey, cp.text);
  await page.fill('#expected-thread', started.id);
  await page.fill('#trail-text', JSON.stringify(earlier));
  await page.click('[data-action=verify-paste]');
  // Also: the trail ends before its thread did, which no log read can settle (a copy of the
  // log from before it went on would show no later head).
  const box = await expectIncomplete(page, ['later-heads', 'unfinished']);
  assert.match(await box.locator('[data-missing=later-heads]').textContent(), /went on after this trail \(leaf \d+ of the log logs its record \d+\)/);
  assert.match(await box.locator('[data-missing=unfinished]').textContent(), /had not ended at this trail's last record/);
  assert.match(await page.locator('[data-check=heads]').textContent(), /^Latest head: not this one; the thread went on/);
  await shot(page, 'earlier-head-incomplete');
  await page.fill('#expected-thread', '');
});

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
  await pasteKey(p, auditKey);
  await p.fill('#trail-text', JSON.stringify(bundle));
  await p.click('[data-action=verify-paste]');
  const box = await expectIncomplete(p, ['policy', 'thread', 'checkpoint']);
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

test('a bundle writing a key twice fails, as proofgate audit fails it', async () => {
  // Replay reads the trail alone and passed it; the core refuses the whole bundle.
  const text = JSON.stringify(bundle);
  await page.goto(`${env.url}/#/verify`);
  await bringOwn(page);
  await page.fill('#trail-text', `{"policyDocuments":[],${text.slice(1)}`);
  await page.click('[data-action=verify-paste]');
  const box = page.locator('.verdict-box[data-outcome=fail]');
  await box.waitFor({ timeout: Z3_TIMEOUT });
  assert.match(await box.textContent(), /`policyDocuments` appears twice/);
  assert.equal(await page.locator('.verdict-box').count(), 1, 'the failure alone, nothing pending beside it');
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
  await pasteKey(p, auditKey);
  await p.click('[data-action=verify-paste]');
  await p.waitForFunction(() => !document.querySelector('.verdict-box [data-missing=key]'));
  // (A page from a plain static host cannot read the audited server's log either.)
  box = await expectIncomplete(p, ['z3', 'thread', 'checkpoint', 'later-heads']);
  assert.match(await box.locator('h3').textContent(), /logic was not re-checked \(Z3 cannot run in this page\)/);
  assert.match(await box.locator('[data-missing=z3]').textContent(), /open the verifier where Z3 can run: a page served with COOP\/COEP/);
  assert.match(await p.locator('[data-check=signature]').textContent(), /✓ Signature/);
  assert.match(await p.locator('[data-check=logic]').textContent(), /Logic not re-checked: Z3 is unavailable/);
  assert.ok(await p.locator('table.records .mark.skip', { hasText: 'Z3 unavailable' }).count() > 0);
  await p.locator('.verdict-box').scrollIntoViewIfNeeded();
  await shot(p, 'bundle-without-z3-incomplete');
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('the chat shows, and sends to the verifier, only the thread it asked for', async () => {
  const res = await fetch(`${env.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: Q1 }] }),
  });
  const other = (await res.json()).proofgate.threadId;
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  // A server answering the first thread's view with another genuine thread: its verify link
  // would audit that thread's genuine, signed, logged trail as if it were the first one's.
  await p.context().route(`**/api/threads/${thread}`, async (r) => {
    const json = await (await fetch(`${env.url}/api/threads/${other}`)).json();
    await r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(json) });
  });
  await p.goto(`${env.url}/#/chat/${thread}`);
  const error = p.locator('.center .error[role=alert]');
  await error.waitFor();
  assert.match(await error.textContent(), new RegExp(`the server answered with thread ${other}, not ${thread}`));
  assert.equal(await p.locator('[data-action=verify]').count(), 0);
  assert.equal(await p.locator('[data-testid=final-answer]').count(), 0);
  // Nor does its debug panel show the other thread's iterations.
  assert.match(await p.locator('#debug').textContent(), /Select a thread to see every iteration/);
  await p.context().close();
});

test('the verifier writes out characters that reorder or hide text, and a malformed record fails', async () => {
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  await p.goto(`${env.url}/#/verify`);
  // A record whose hash is a number and whose seq is an object: the page must say it fails,
  // not stop drawing.
  await p.fill('#trail-text', JSON.stringify([{ seq: { toString: 1 }, prev: '', at: 0, kind: 'THREAD_STARTED', body: {}, hash: 1 }]));
  await p.click('[data-action=verify-paste]');
  const box = p.locator(DONE);
  await box.waitFor({ timeout: Z3_TIMEOUT });
  assert.equal(await box.getAttribute('data-outcome'), 'fail', await box.textContent());
  // The auditor names a thread with a right-to-left override: shown written out, so a thread
  // id that reads like it on screen cannot pass for it.
  await p.fill('#expected-thread', `${thread}\u202E`);
  await p.fill('#trail-text', JSON.stringify(bundle));
  await p.click('[data-action=verify-paste]');
  await p.waitForFunction(() => document.querySelector('.verdict-box')?.dataset.outcome === 'fail', null, { timeout: Z3_TIMEOUT });
  const line = await p.locator('[data-check=thread]').textContent();
  assert.ok(line.includes(`not ${thread}\\u{202E}'s`), line);
  assert.ok(!line.includes('\u202E'), line);
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
  const cp = await checkpointNow();
  const otherBundle = await (await fetch(`${env.url}/api/threads/${other}/audit/bundle?from=${cp.size}`)).text();
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
  await bringOwn(p, auditKey, cp.text);
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

test('a policy loaded while Z3 runs: the superseded run neither announces nor writes its outcome', async () => {
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  // Holds the messages to Z3's workers while `z3.hold` is set (a slow Z3), and counts those in
  // flight, so the test knows when every run is done with Z3.
  await p.addInitScript(() => {
    const Base = window.Worker;
    const held = [];
    window.z3 = { inFlight: 0, last: 0, hold: false, release() { this.hold = false; for (const send of held.splice(0)) send(); } };
    window.Worker = class extends Base {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', () => { window.z3.inFlight--; window.z3.last = performance.now(); });
      }
      postMessage(...args) {
        window.z3.inFlight++;
        window.z3.last = performance.now();
        if (window.z3.hold) held.push(() => super.postMessage(...args));
        else super.postMessage(...args);
      }
    };
  });
  await p.goto(`${env.url}/#/verify?thread=${encodeURIComponent(thread)}`);
  await bringOwn(p);
  // A full audit that would pass, awaiting Z3...
  await p.evaluate(() => { window.z3.hold = true; });
  await p.fill('#trail-text', JSON.stringify(bundle));
  await p.click('[data-action=verify-paste]');
  await p.locator('.verdict-box[data-outcome=pending]').waitFor();
  // ...when the auditor loads another file as the policy: that verification fails at once.
  const notAPolicy = path.join(env.work, 'not-a-policy.json');
  writeFileSync(notAPolicy, '{"not": "a policy"}');
  await p.setInputFiles('#policy-file', notAPolicy);
  await p.locator('.verdict-box[data-outcome=fail]').waitFor();
  const failed = await p.locator('.verdict-box h3').textContent();
  assert.match(await p.locator('#conn').textContent(), /^✗ /);
  // Z3 answers the first run; once it is idle, nothing of that run shows.
  await p.evaluate(() => window.z3.release());
  await p.waitForFunction(() => window.z3.inFlight === 0 && performance.now() - window.z3.last > 2000, null, { timeout: Z3_TIMEOUT, polling: 200 });
  assert.equal(await p.locator('.verdict-box').count(), 1);
  assert.equal(await p.locator('.verdict-box').getAttribute('data-outcome'), 'fail');
  assert.equal(await p.locator('.verdict-box h3').textContent(), failed);
  assert.doesNotMatch(await p.locator('#conn').textContent(), /passes/);
  assert.equal(await p.locator('#conn').textContent(), failed);
  await shot(p, 'superseded-run-silent');
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('a trail in an older audit format is not fully verified, and says which format', async () => {
  const [intact] = JSON.parse(readFileSync(path.join(root, 'crates/core/tests/fixtures/trails-v5.json'), 'utf8'));
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  // Nothing served, nothing brought: only the format matters here.
  await p.context().route('**/api/policies', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: '{"policies":[]}' }));
  await p.context().route('**/.well-known/proofgate/audit-key', (r) => r.fulfill({ status: 404, body: 'not here' }));
  await p.goto(`${env.url}/#/verify`);
  await p.waitForFunction(() => /No policy loaded/.test(document.querySelector('#policy-source')?.textContent || ''));
  await p.fill('#trail-text', JSON.stringify({ trail: intact.trail, policyDocuments: intact.policyDocuments }));
  await p.click('[data-action=verify-paste]');
  // The fixture was validated by Amazon Bedrock: its premises are the validator's word too.
  const box = await expectIncomplete(p, ['older-format', 'policy', 'thread', 'validator-premises', 'key']);
  assert.match(await box.locator('h3').textContent(), /the trail was written in audit format 5, whose rules are weaker than the current format \d+'s/);
  assert.match(await box.locator('[data-missing=older-format]').textContent(), /a pass under it proves less/);
  assert.match(await p.locator('[data-check=format]').textContent(), /^Audit format 5 \(older than the current format \d+: replayed under its weaker rules\)$/);
  assert.match(await p.locator('.verdict-box li', { hasText: 'Replay:' }).textContent(), /every decision of the loop reproduced/);
  await shot(p, 'older-format-incomplete');
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('a full audit of a thread that did not end VALID names its outcome in the passing heading', async () => {
  // Two iterations and no follow-up questions: the thread ends at the iteration limit.
  const res = await fetch(`${env.url}/api/threads`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ question: 'I am 70. How much will I pay in total for admission?', settings: { maxIterations: 2, followUpQuestions: 'DISABLED' } }),
  });
  const created = await res.json();
  assert.equal(created.outcome?.status, 'MAX_ITERATIONS', JSON.stringify(created).slice(0, 300));
  await page.goto(`${env.url}/#/verify?url=${encodeURIComponent(`/api/threads/${created.id}/audit/bundle`)}`);
  await bringOwn(page, auditKey, (await checkpointNow()).text);
  const box = await rerun(page, '[data-action=load-url]');
  assert.equal(await box.getAttribute('data-outcome'), 'pass', await box.textContent());
  assert.match(await box.locator('h3').textContent(), /^✓ Every record passes: the thread ended MAX_ITERATIONS \(the iteration limit was reached; its answer was not verified\)$/);
  await shot(page, 'pass-names-max-iterations');
});

test('the proof view runs the server\'s stored scripts apart, and a match is no verdict', async () => {
  const p = await newPage(env, { width: 1280, height: 900 }, [env.url]);
  // A server that stores scripts printing whatever answer was recorded.
  await p.context().route(`**/api/threads/${thread}`, async (r) => {
    const json = await (await r.fetch()).json();
    const forge = (v) => {
      if (Array.isArray(v)) v.forEach(forge);
      else if (v && typeof v === 'object') {
        if (typeof v.script === 'string' && typeof v.expected === 'string') v.script = `(echo "${v.expected}")`;
        Object.values(v).forEach(forge);
      }
    };
    forge(json);
    await r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(json) });
  });
  const workers = [];
  p.on('worker', (w) => {
    if (!/z3-worker\.js$/.test(w.url())) return;
    const seen = { closed: false };
    w.on('close', () => { seen.closed = true; });
    workers.push(seen);
  });
  await p.goto(`${env.url}/#/chat/${thread}/proof`);
  const proof = p.locator('#proof');
  await proof.waitFor();
  await proof.locator('[data-action=run-z3]').first().click();
  const status = proof.locator('.z3-status[data-outcome]').first();
  await status.waitFor({ timeout: Z3_TIMEOUT });
  assert.equal(await status.getAttribute('data-outcome'), 'reproduced', await status.textContent());
  assert.match(await status.textContent(), /reproduced every recorded answer .*the scripts are the server's, so this is no verdict; the audit verifier rebuilds its own checks/);
  assert.doesNotMatch(await status.textContent(), /agrees|✓/);
  assert.equal(await proof.locator('.mark.pass').count(), 0, 'nothing green');
  assert.match(await proof.locator('.z3-result').first().textContent(), /reproduced the recorded answer \(the script is the server's\)/);
  // Its own worker, closed once done.
  assert.equal(workers.length, 1);
  for (let i = 0; i < 50 && !workers[0].closed; i++) await p.waitForTimeout(100);
  assert.equal(workers[0].closed, true, 'the stored scripts\' worker is closed after use');
  await shot(p, 'proof-stored-scripts-no-verdict');
  // The verifier in the same page runs in a worker of its own, and rebuilds its checks: a pass.
  await p.goto(`${env.url}/#/verify?url=${encodeURIComponent(`/api/threads/${thread}/audit/bundle`)}`);
  await bringOwn(p);
  const box = await rerun(p, '[data-action=load-url]');
  assert.equal(await box.getAttribute('data-outcome'), 'pass', await box.textContent());
  assert.equal(workers.length, 2);
  assert.equal(workers[1].closed, false);
  assert.deepEqual(p.problems, []);
  await p.context().close();
});

test('on the auditor\'s own server, another server\'s bundle: its log is read from the address the auditor gives', async () => {
  // A review's case: the page read the later heads from its own server's log, so on an
  // auditor's own `proofgate serve` a genuine bundle of another server failed ("not a log its
  // checkpoints sign"), and only the audited server's own page, whose script is its word,
  // could pass it. The log of another key is now not checked (incomplete), and the audited
  // server's public log is read from its address (its public routes allow any origin).
  const own = await start({ shotsSubdir: 'audit', keepShots: true });
  try {
    const cp = await checkpointNow();
    const theirs = await (await fetch(`${env.url}/api/threads/${thread}/audit/bundle?from=${cp.size}`)).json();
    const p = await newPage(own, { width: 1280, height: 900 }, [own.url, env.url]);
    await p.goto(`${own.url}/#/verify?thread=${encodeURIComponent(thread)}`);
    await p.waitForFunction(() => document.querySelector('#audit-key')?.value);
    await bringOwn(p, auditKey, cp.text);
    await p.fill('#trail-text', JSON.stringify(theirs));
    await p.click('[data-action=verify-paste]');
    const box = await expectIncomplete(p, ['later-heads']);
    assert.match(await box.locator('[data-missing=later-heads]').textContent(), /not signed by the verifier key you gave.*give the audited server's address/);
    await p.fill('#log-server', env.url);
    const full = await rerun(p, '[data-action=verify-paste]');
    assert.equal(await full.getAttribute('data-outcome'), 'pass', await full.textContent());
    assert.match(await p.locator('[data-check=heads]').textContent(), /✓ Latest head/);
    assert.deepEqual(p.problems, []);
    await p.context().close();
  } finally {
    await own.stop();
  }
});

test('a checkpoint saved before the trail was logged does not hold it: incomplete, never a pass', async () => {
  // A review's case: a log rebuilt from the trail's leaf on still extends a checkpoint saved
  // before it, so only a checkpoint that counts the trail's head anchors the trail.
  const before = await (await fetch(`${env.url}/api/log/checkpoint`)).text();
  const beforeSize = Number(before.split('\n')[1]);
  const res = await fetch(`${env.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: Q1 }] }),
  });
  const id = (await res.json()).proofgate.threadId;
  const later = await (await fetch(`${env.url}/api/threads/${id}/audit/bundle?from=${beforeSize}`)).json();
  assert.equal(later.inclusion.leafIndex, beforeSize);
  await page.goto(`${env.url}/#/verify?thread=${encodeURIComponent(id)}`);
  await bringOwn(page, auditKey, before);
  await page.fill('#trail-text', JSON.stringify(later));
  await page.click('[data-action=verify-paste]');
  const box = await expectIncomplete(page, ['checkpoint']);
  assert.match(await box.locator('[data-missing=checkpoint]').textContent(), new RegExp(`our saved checkpoint \\(${beforeSize} leaves\\) predates this trail's head \\(leaf ${beforeSize}\\)`));
  assert.match(await page.locator('[data-check=consistency]').textContent(), /logged after it/);
  // The checkpoint the audit offers to save counts the head: with it, the same bundle is a
  // full audit.
  const after = await page.locator('#checked-checkpoint').inputValue();
  await page.fill('#saved-checkpoint', after);
  const full = await rerun(page, '[data-action=verify-paste]');
  assert.equal(await full.getAttribute('data-outcome'), 'pass', await full.textContent());
  assert.deepEqual(page.problems, []);
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
