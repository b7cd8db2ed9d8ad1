// What a review of the npm package found, each kept fixed: structured input read one way by
// every export (deep nesting a clean error), a thread resumed only as its trail records it,
// the README's example true, verifyTrust checking the records under the signed head, and
// times that stay safe integers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, createPrivateKey, generateKeyPairSync, sign } from 'node:crypto';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { aggregateVerdict, prioritizeFindings, Thread, verifyTrust, replayAudit, auditNotChecked, trailTextOf, auditFormatVersion, logHeads, verifyCheckpoint, policyDocumentsOf } from 'proofgate';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const invalid = { invalid: { contradictingRules: [{ identifier: 'R1' }] } };
const shown = { claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] };
const valid = { valid: { translation: shown, supportingRules: [{ identifier: 'R1' }] } };

test('deeply nested findings are a clean error and the instance keeps working', () => {
  // In a child process: on a build that walks the JS value itself, this overflows the wasm
  // stack and breaks every later call of the shared instance.
  const child = `
    const { aggregateVerdict, prioritizeFindings, Thread } = require('proofgate');
    let deep = {};
    for (let i = 0; i < 3000; i++) deep = { a: deep };
    const errors = [];
    for (const f of [() => aggregateVerdict([{ valid: { x: deep } }]),
                     () => prioritizeFindings([{ valid: { x: deep } }])]) {
      try { f(); errors.push(null); } catch (e) { errors.push(String(e && e.message)); }
    }
    let after;
    try { after = aggregateVerdict([{ invalid: {} }]); } catch (e) { after = String(e.message); }
    const t = new Thread(null, 'q', 't', 0);
    process.stdout.write(JSON.stringify({ errors, after, phase: t.phase }));
  `;
  // Bounded: a child that never ends fails this test instead of holding the whole run.
  const run = spawnSync(process.execPath, ['-e', child], { cwd: here('..'), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  assert.equal(run.status, 0, `${run.error ?? ''} ${run.signal ?? ''} ${run.stderr}`);
  const { errors, after, phase } = JSON.parse(run.stdout);
  for (const e of errors) assert.match(e ?? 'no error', /findings list is malformed: recursion limit exceeded/);
  assert.deepEqual(after, { verdict: 'INVALID' });
  assert.equal(phase, 'GENERATE_INITIAL');
});

/** The verdict a thread records for `findings`, or 'throws'. */
function threadVerdict(findings) {
  const t = new Thread(null, 'q', 't-agree', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  try {
    t.handle({ type: 'Validated', findings, now: 2 });
  } catch {
    return 'throws';
  }
  return t.steps()[0].validation.verdict;
}

function exportVerdict(findings) {
  try {
    return aggregateVerdict(findings);
  } catch {
    return 'throws';
  }
}

test('aggregateVerdict and a Thread read the same odd values the same way', () => {
  const withConfidence = (confidence) => ({
    valid: { translation: { ...shown, confidence }, supportingRules: [{ identifier: 'R1' }] },
  });
  const table = [
    ['a Map as a finding', [new Map([['invalid', {}]])]],
    ['a Map as a finding body', [valid, { invalid: new Map([['contradictingRules', []]]) }]],
    ['a list as a finding body', [{ valid: [] }]],
    ['a list as the translation', [{ valid: { translation: [], supportingRules: [{ identifier: 'R1' }] } }]],
    ['NaN confidence', [withConfidence(NaN)]],
    ['1e400 confidence', [withConfidence(1e400)]],
    ['-0 confidence', [withConfidence(-0)]],
    ['an undefined body', [{ valid: undefined }]],
    ['a Date as logic', [{ valid: { translation: { claims: [{ logic: new Date(0) }] }, supportingRules: [{ identifier: 'R1' }] } }]],
    ['a BigInt', [{ valid: { translation: { confidence: 1n } } }]],
    ['plain', [valid, { noTranslations: {} }]],
  ];
  for (const [name, findings] of table) {
    assert.deepEqual(exportVerdict(findings), threadVerdict(findings), name);
  }
  // The Map is what JSON makes of it (an empty object), not read as its entries.
  assert.equal(exportVerdict(table[0][1]), 'throws');
  assert.deepEqual(exportVerdict(table[1][1]), { verdict: 'INVALID' });
});

test('prioritizeFindings reads findings as JSON too', () => {
  assert.throws(() => prioritizeFindings([new Map([['invalid', {}]])]), /found none/);
  assert.deepEqual(prioritizeFindings([valid, { invalid: new Map() }]), [{ invalid: {} }, valid]);
});

/** A thread with one INVALID validation, waiting for the rewrite. */
function drivenThread() {
  const t = new Thread({ maxIterations: 3 }, 'How much?', 't-forge', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  t.handle({ type: 'Validated', findings: [invalid], now: 2 });
  return t;
}

test('Thread.fromJSON refuses a state its trail does not record', () => {
  const t = drivenThread();
  assert.equal(t.phase, 'REWRITING_LOOP');
  const forged = t.toJSON();
  forged.state = {
    phase: 'COMPLETED',
    outcome: { status: 'VALID', answer: 'Anything at all.', findings: [], iterations: 1, verified: true },
  };
  for (const json of [forged, JSON.stringify(forged)]) {
    assert.throws(() => Thread.fromJSON(json), /differs from the one its trail records \(at `state`\)/);
  }
  // The steps are a copy too.
  const steps = t.toJSON();
  steps.steps[0].reply.text = 'Something else.';
  assert.throws(() => Thread.fromJSON(steps), /differs from the one its trail records \(at `steps`\)/);
  // A trail that does not replay.
  const trail = t.toJSON();
  trail.auditTrail[1].body.text = 'A2';
  assert.throws(() => Thread.fromJSON(trail), /its trail does not replay/);
  const none = t.toJSON();
  delete none.auditTrail;
  assert.throws(() => Thread.fromJSON(none), /no auditTrail/);
});

test('a genuine thread round-trips through fromJSON and goes on', () => {
  const t = drivenThread();
  const resumed = Thread.fromJSON(JSON.stringify(t.toJSON()));
  assert.deepEqual(resumed.toJSON(), t.toJSON());
  resumed.handle({ type: 'LlmReplied', text: 'DECISION: REWRITE\nANSWER: A2', now: 3 });
  const end = resumed.handle({ type: 'Validated', findings: [valid], now: 4 });
  assert.equal(end.status, 'VALID');
  assert.equal(end.answer, 'A2');
  // Finished, with a policy: the document comes from the thread's own configuration.
  const policy = { rules: [{ id: 'R1', expression: '(= fee 5)', english: 'The fee is 5.' }], variables: [{ name: 'fee', description: 'The fee' }] };
  const p = new Thread({ maxIterations: 1, policy }, 'q', 't-policy', 0);
  p.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  p.handle({ type: 'Validated', findings: [invalid], now: 2 });
  const again = Thread.fromJSON(p.toJSON());
  assert.deepEqual(again.outcome(), p.outcome());
  assert.equal(again.outcome().verified, false);
  assert.equal(replayAudit(again.auditTrail(), again.policyDocuments()).ok, true);
});

test("the README's npm example gives the output it documents", () => {
  const readme = readFileSync(here('../../../README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The npm package'));
  const code = section.match(/```js\n([\s\S]*?)```/)[1];
  // Each line followed by a `// value` comment is checked against that value.
  const lines = code.trimEnd().split('\n');
  const script = [];
  let checked = 0;
  for (let i = 0; i < lines.length; i++) {
    const next = lines[i + 1] ?? '';
    if (!lines[i].startsWith('//') && next.startsWith('// ')) {
      script.push(`checks.push([${lines[i].replace(/;\s*$/, '')}, (${next.slice(3)})]);`);
      checked++;
      i++;
    } else {
      script.push(lines[i]);
    }
  }
  const require = createRequire(import.meta.url);
  const load = (name) => require(name === './crates/wasm/pkg' ? 'proofgate' : name);
  const checks = [];
  new Function('require', 'checks', script.join('\n'))(load, checks);
  assert.ok(checked >= 3, 'the example documents its outputs');
  assert.equal(checks.length, checked);
  for (const [got, documented] of checks) assert.deepEqual(got, documented);
});

// A signed audit bundle, as the server makes one: a C2SP signed note (Ed25519) over the
// thread head, in a log of one leaf whose checkpoint is signed with the same key.
function signer(name) {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'jwk' }).x;
  const pub = Buffer.from(raw, 'base64url');
  const keyData = Buffer.concat([Buffer.from([1]), pub]);
  const keyHash = createHash('sha256').update(Buffer.concat([Buffer.from(`${name}\n`), keyData])).digest().subarray(0, 4);
  const verifierKey = `${name}+${keyHash.toString('hex')}+${keyData.toString('base64')}`;
  const signNote = (text) => {
    const signature = sign(null, Buffer.from(text), createPrivateKey(privateKey.export({ format: 'pem', type: 'pkcs8' })));
    return `${text}\n\u2014 ${name} ${Buffer.concat([keyHash, signature]).toString('base64')}\n`;
  };
  return { verifierKey, signNote };
}

function signedBundle() {
  const bundle = JSON.parse(readFileSync(here('../../core/tests/fixtures/park-local-bundle.json'), 'utf8'));
  const { verifierKey, signNote } = signer('proofgate.test');
  const last = bundle.trail.at(-1);
  const head = `proofgate/thread-head/v1\n${bundle.trail[0].body.threadId}\n${last.seq}\n${last.hash}\n`;
  const leaf = createHash('sha256').update(Buffer.concat([Buffer.from([0]), Buffer.from(head)])).digest('base64');
  bundle.signedHead = signNote(head);
  bundle.checkpoint = signNote(`proofgate.test/log\n1\n${leaf}\n`);
  bundle.inclusion = { leafIndex: 0, hashes: [] };
  return { bundle, verifierKey, signNote };
}

test('verifyCheckpoint reads a checkpoint only under the key that signed it', () => {
  // What the verifier asks before reading a log's leaves: another key's log is not read.
  const { bundle, verifierKey } = signedBundle();
  const info = verifyCheckpoint(bundle.checkpoint, verifierKey);
  assert.equal(info.size, 1);
  assert.equal(info.origin, 'proofgate.test/log');
  const other = signer('proofgate.test');
  assert.throws(() => verifyCheckpoint(bundle.checkpoint, other.verifierKey), /proofgate: /);
  assert.throws(() => verifyCheckpoint('not a note', verifierKey), /proofgate: /);
});

test('verifyTrust checks the records under the signed head', () => {
  const { bundle, verifierKey } = signedBundle();
  const genuine = verifyTrust(JSON.stringify(bundle), verifierKey);
  assert.equal(genuine.ok, true, JSON.stringify(genuine));
  assert.equal(genuine.checkpoint.size, 1);
  // A translator's reply rewritten, every `hash` string kept: the last record still states
  // the signed hash, but the records no longer hash up to it.
  const altered = structuredClone(bundle);
  altered.trail[2].body.text = altered.trail[2].body.text.replace('1000004', '30');
  assert.equal(altered.trail.at(-1).hash, bundle.trail.at(-1).hash);
  const report = verifyTrust(JSON.stringify(altered), verifierKey);
  assert.equal(report.ok, false);
  assert.equal(report.signature.ok, false);
  assert.match(report.signature.detail, /record 2 \(TRANSLATOR_REPLIED\).*the trail was altered/);
  // A key written twice is refused, as replay refuses it: a reader keeping the first copy
  // would see another head than one keeping the last.
  const text = JSON.stringify(bundle);
  const doubled = `{"signedHead":"forged",${text.slice(1)}`;
  assert.throws(() => verifyTrust(doubled, verifierKey), /`signedHead` appears twice/);
  assert.throws(() => verifyTrust(JSON.stringify(bundle.trail), verifierKey), /plain trail/);
});

test('auditNotChecked names what a full audit checks that this one did not, as proofgate audit does', () => {
  // verifyTrust and replayAudit answered ok for a bundle audited without the thread, the
  // auditor's policy or a saved checkpoint, and nothing in the package said so.
  const { bundle } = signedBundle();
  const text = JSON.stringify(bundle);
  const version = replayAudit(trailTextOf(text), bundle.policyDocuments ?? []).formatVersion;
  const ids = (t, inputs) => auditNotChecked(t, inputs).map((g) => g.id);
  const older = version < auditFormatVersion() ? ['older-format'] : [];
  const leaf = bundle.inclusion.leafIndex;
  const full = { threadNamed: true, policyGiven: true, keyGiven: true, checkpointGiven: true, checkpointSize: leaf + 1, logScanned: true };
  assert.deepEqual(ids(text, full), older);
  // A checkpoint holds only the leaves it counts: one saved before the head was logged, or
  // whose size was not given, anchors nothing of this trail. The head's leaf is the bundle's
  // to say, not the caller's.
  for (const checkpointSize of [leaf, 0, undefined]) {
    assert.deepEqual(ids(text, { ...full, checkpointSize }), [...older, 'checkpoint'], `${checkpointSize}`);
  }
  assert.deepEqual(ids(text, { ...full, checkpointSize: leaf, headLeaf: 0 }), [...older, 'checkpoint']);
  assert.match(auditNotChecked(text, { ...full, checkpointSize: leaf }).at(-1).what, new RegExp(`counts ${leaf} leaves and the trail's head is leaf ${leaf}`));
  assert.deepEqual(ids(text, { ...full, logScanned: false }), [...older, 'later-heads']);
  assert.deepEqual(ids(text, {}), [...older, 'policy', 'thread', 'key']);
  assert.deepEqual(ids(text, { ...full, checkpointGiven: false }), [...older, 'checkpoint']);
  // Whether it is a bundle is the text's to say: a plain trail carries no signature.
  assert.deepEqual(ids(JSON.stringify(bundle.trail), full), [...older, 'bundle']);
  assert.deepEqual(ids(text, { ...full, bundle: false }), older);
  for (const g of auditNotChecked(text, {})) assert.ok(g.what.length > 20, g.id);
  // A Bedrock-validated trail (no translations recorded): its premises are the validator's word.
  const bedrock = bundle.trail.filter((r) => r.kind !== 'CHECK');
  assert.ok(ids(JSON.stringify({ ...bundle, trail: bedrock }), full).includes('validator-premises'));
  assert.throws(() => auditNotChecked(text, { thread: true }), /audit inputs/);
  // The trail's format is the trail's to say: the fixture's older format is named.
  assert.ok(version < auditFormatVersion());
  assert.deepEqual(ids(text, full), ['older-format']);
});

test('times beyond Number.MAX_SAFE_INTEGER are refused', () => {
  assert.throws(() => new Thread({ questionTimeoutMs: 2 ** 62 }, 'q', 't', 0), /questionTimeoutMs must be a safe integer/);
  assert.throws(() => Thread.withAnswer({ questionTimeoutMs: 2 ** 53 }, 'q', { text: 'A', source: 'user' }, 't', 0), /questionTimeoutMs must be a safe integer/);
  assert.throws(() => new Thread(null, 'q', 't', 2 ** 53), /whole number of milliseconds/);
  const t = new Thread(null, 'q', 't-time', 0);
  const before = JSON.stringify(t);
  assert.throws(() => t.handle({ type: 'LlmReplied', text: 'A1', now: 2 ** 60 }), /now must be a safe integer/);
  // now itself safe, but the deadline of questions asked now would not be.
  assert.throws(() => t.handle({ type: 'LlmReplied', text: 'A1', now: Number.MAX_SAFE_INTEGER }), /plus questionTimeoutMs .* beyond Number.MAX_SAFE_INTEGER/);
  assert.equal(JSON.stringify(t), before);
  // The largest timeout that is allowed keeps the trail replayable.
  const big = new Thread({ questionTimeoutMs: Number.MAX_SAFE_INTEGER - 10 }, 'q', 't-big', 0);
  big.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  big.handle({ type: 'Validated', findings: [{ satisfiable: {} }], now: 2 });
  const ask = big.handle({ type: 'LlmReplied', text: 'DECISION: ASK_QUESTIONS\nQUESTION: When?', now: 3 });
  assert.equal(ask.deadline, Number.MAX_SAFE_INTEGER - 7);
  assert.equal(replayAudit(big.auditTrail()).ok, true);
});

test('logHeads tells a later head of the thread in a newer log, and trusts no part of what it is given', () => {
  // A bundle is genuine for an earlier head of its thread too: its own checkpoint's leaves end
  // before the later head, which only a newer checkpoint's leaves show.
  const { bundle, verifierKey, signNote } = signedBundle();
  const text = JSON.stringify(bundle);
  const leafHash = (data) => createHash('sha256').update(Buffer.concat([Buffer.from([0]), Buffer.from(data)])).digest();
  const last = bundle.trail.at(-1);
  const thread = bundle.trail[0].body.threadId;
  const head = `proofgate/thread-head/v1\n${thread}\n${last.seq}\n${last.hash}\n`;
  const root2 = (a, b) => createHash('sha256').update(Buffer.concat([Buffer.from([1]), leafHash(a), leafHash(b)])).digest('base64');
  const later = `proofgate/thread-head/v1\n${thread}\n${last.seq + 4}\n${'ab'.repeat(32)}\n`;
  const current = signNote(`proofgate.test/log\n2\n${root2(head, later)}\n`);
  const proof = [leafHash(later).toString('base64')];
  assert.deepEqual(logHeads(text, verifierKey, current, proof, [signNote(head), signNote(later)]),
    { kind: 'wentOn', leaf: 1, seq: last.seq + 4 });
  // The bundle's own log: its head is the thread's last.
  assert.deepEqual(logHeads(text, verifierKey, bundle.checkpoint, [], [signNote(head)]), { kind: 'latest' });
  // A head of an earlier record after the bundle's: a fork.
  const fork = `proofgate/thread-head/v1\n${thread}\n${last.seq - 1}\n${'cd'.repeat(32)}\n`;
  const forked = signNote(`proofgate.test/log\n2\n${root2(head, fork)}\n`);
  const verdict = logHeads(text, verifierKey, forked, [leafHash(fork).toString('base64')], [signNote(head), signNote(fork)]);
  assert.equal(verdict.kind, 'problem');
  assert.match(verdict.detail, /forked/);
  // Leaves that are not the log, a checkpoint not extending the bundle's, another key, a
  // plain trail: thrown, never read as "the latest".
  assert.throws(() => logHeads(text, verifierKey, current, proof, [signNote(head), signNote(head)]), /do not hash to the checkpoint's root/);
  assert.throws(() => logHeads(text, verifierKey, current, [], [signNote(head), signNote(later)]), /does not extend the bundle's/);
  assert.throws(() => logHeads(text, signer('other').verifierKey, current, proof, []), /checkpoint/);
  assert.throws(() => logHeads(JSON.stringify(bundle.trail), verifierKey, current, proof, []), /plain trail/);
});

test('a VALID beside text the translators left untranslated must say so (a review: verified, and the audit passed)', () => {
  const policyText = readFileSync(here('../../../examples/policies/park-admission.json'), 'utf8');
  const doc = policyDocumentsOf(policyText)[0];
  const config = { policy: doc.policy, translation: { translators: 2, repairAttempts: 0, requiredAgreement: 2, vocabulary: JSON.parse(policyText) } };
  const pair = { premises: [], claims: [{ logic: '(= baseFee 50.0)', naturalLanguage: 'The regular fee is $50' }] };
  const reply = JSON.stringify({ pairs: [pair], untranslatedPremises: [], untranslatedClaims: ['Seniors pay $5.'] });
  const proved = { valid: { translation: { ...pair, confidence: 1 }, supportingRules: [{ identifier: 'BASEFEE00000' }] } };
  const translated = () => {
    let now = 1_700_000_000_000;
    const t = new Thread(config, 'What is the regular fee?', 'untranslated', now);
    t.start();
    const { calls } = t.handle({ type: 'LlmReplied', text: 'The regular fee is $50. Seniors pay $5.', now: (now += 1000) });
    for (const { translator, attempt, call } of calls) {
      t.handle({ type: 'TranslatorReplied', translator, attempt, call, text: reply, now: (now += 1000) });
    }
    return [t, now];
  };
  // Findings without the untranslated text: refused, and the thread still waits for findings.
  const [t, now] = translated();
  assert.throws(() => t.handle({ type: 'Validated', findings: [proved], now: now + 1 }),
    /left text untranslated \("Seniors pay \$5\."\).*no NO_TRANSLATIONS finding/);
  // With it, as the proxy's reasoner reports it: a VALID with the not-covered warning.
  const done = t.handle({ type: 'Validated', findings: [proved, { noTranslations: {} }], now: now + 2 });
  assert.equal(done.status, 'VALID_WITH_WARNING');
  assert.match(done.warning, /not covered by the policy/);
  assert.equal(replayAudit(JSON.stringify(t.auditTrail()), t.policyDocuments()).ok, true);
});

test('a reply names the translator call it answers: a late reply to an earlier round is refused (a review)', () => {
  const policyText = readFileSync(here('../../../examples/policies/park-admission.json'), 'utf8');
  const doc = policyDocumentsOf(policyText)[0];
  const config = { policy: doc.policy, translation: { translators: 1, repairAttempts: 0, requiredAgreement: 1, vocabulary: JSON.parse(policyText) } };
  const pair = { premises: [], claims: [{ logic: '(= baseFee 50.0)', naturalLanguage: 'The regular fee is $50' }] };
  const reply = JSON.stringify({ pairs: [pair], untranslatedPremises: [], untranslatedClaims: [] });
  let now = 1_700_000_000_000;
  const t = new Thread(config, 'What is the regular fee?', 'late-reply', now);
  t.start();
  const first = t.handle({ type: 'LlmReplied', text: 'The regular fee is $40.', now: (now += 1000) }).calls[0];
  assert.match(first.call, /^[0-9a-f]{16}$/);
  t.handle({ type: 'TranslatorReplied', translator: 0, attempt: 0, call: first.call, text: reply, now: (now += 1000) });
  // Findings that send the answer back to the rewriter, which rewrites it.
  const refuted = { invalid: { translation: { ...pair, confidence: 1 }, contradictingRules: [{ identifier: 'BASEFEE00000' }] } };
  t.handle({ type: 'Validated', findings: [refuted], now: (now += 1000) });
  const second = t.handle({ type: 'LlmReplied', text: 'DECISION: REWRITE\nANSWER: The regular fee is $50.', now: (now += 1000) }).calls[0];
  assert.notEqual(second.call, first.call);
  const late = (call) => ({ type: 'TranslatorReplied', translator: 0, attempt: 0, call, text: reply, now: (now += 1000) });
  assert.throws(() => t.handle(late(first.call)), /not the call .* waited for \(a late reply/);
  assert.throws(() => t.handle(late(undefined)), /carries no `call`/);
  assert.equal(t.handle(late(second.call)).type, 'Check');
});

test('a translation configuration with no translator or an agreement outside 1..translators is refused (a review)', () => {
  const policyText = readFileSync(here('../../../examples/policies/park-admission.json'), 'utf8');
  const doc = policyDocumentsOf(policyText)[0];
  const config = (translators, requiredAgreement) => ({
    policy: doc.policy,
    translation: { translators, repairAttempts: 0, requiredAgreement, vocabulary: JSON.parse(policyText) },
  });
  for (const [k, agree] of [[2, 0], [2, 3], [0, 0], [0, 1]]) {
    assert.throws(() => new Thread(config(k, agree), 'What is the regular fee?', 'counts', 1),
      /translators must be at least 1 and requiredAgreement from 1 to translators/, `${k}, ${agree}`);
  }
  assert.ok(new Thread(config(2, 1), 'What is the regular fee?', 'counts', 1));
});

test('Thread.forReply keeps each turn\'s role: an assistant turn does not state the user\'s facts (a review)', () => {
  const valid = { valid: {
    translation: { premises: [{ logic: '(= age 70)', naturalLanguage: 'The user is 70.' }], claims: [{ logic: '(= fee 5)', naturalLanguage: 'The fee is 5.' }], confidence: 1 },
    supportingRules: [{ identifier: 'R1' }],
  } };
  const answer = { text: 'You pay 5 dollars.', source: 'upstream' };
  const run = (conversation) => {
    const t = Thread.forReply({}, conversation, answer, 'for-reply', 1_700_000_000_000);
    assert.equal(t.start().type, 'Validate');
    return t.handle({ type: 'Validated', findings: [valid], now: 1_700_000_001_000 });
  };
  // The age said by the assistant (the LLM) is no fact of the user's: not VALID.
  const said = run([
    { role: 'assistant', text: 'Sure! I am 70 years old, by the way.' },
    { role: 'user', text: 'How much do I pay?' },
  ]);
  assert.notEqual(said.status, 'VALID', JSON.stringify(said));
  // Said by the user, it is.
  const own = run([{ role: 'user', text: 'I am 70 years old.' }, { role: 'user', text: 'How much do I pay?' }]);
  assert.equal(own.status, 'VALID', JSON.stringify(own));
  assert.throws(() => Thread.forReply({}, [{ role: 'assistant', text: 'Hi' }], answer, 'x', 1), /has no user turn/);
  // Tool results after the user's message: the user's message is the question, the tool's
  // record a fact.
  const tooled = Thread.forReply({}, [
    { role: 'user', text: 'How much do I pay?' },
    { role: 'assistant', text: 'called lookup_customer with {}' },
    { role: 'tool', text: '{"age": 70}' },
  ], answer, 'tooled', 1_700_000_000_000);
  assert.equal(tooled.start().type, 'Validate');
  assert.equal(tooled.handle({ type: 'Validated', findings: [valid], now: 1_700_000_001_000 }).status, 'VALID');
});

test('live input cannot choose an older format\'s rules (a review)', () => {
  const t = Thread.withAnswer({}, 'How much do I pay?', { text: 'You pay 5 dollars.', source: 'upstream' }, 'rules', 1_700_000_000_000);
  t.start();
  assert.throws(() => t.handle({ type: 'Validated', findings: [{ noTranslations: {} }], verdictRules: 3, now: 1_700_000_001_000 }),
    /set by handle itself/);
  assert.equal(t.handle({ type: 'Validated', findings: [{ noTranslations: {} }], now: 1_700_000_002_000 }).status, 'NOT_COVERED');
});

test('a lone surrogate in an input is refused with an error that says so (a review)', () => {
  const t = new Thread({}, 'How much do I pay?', 'surrogate', 1_700_000_000_000);
  t.start();
  assert.throws(() => t.handle({ type: 'LlmReplied', text: 'You pay \uD800 dollars.', now: 1_700_000_001_000 }),
    /lone UTF-16 surrogate/);
});

test('an input holding an integer JavaScript cannot hold exactly is refused, not recorded (a review)', () => {
  const t = Thread.withAnswer({}, 'How much do I pay?', { text: 'You pay 5 dollars.', source: 'upstream' }, 'big-int', 1_700_000_000_000);
  t.start();
  const text = '{"type": "Validated", "findings": [{"noTranslations": {}}], "evidence": {"id": 9007199254740993}, "now": 1700000001000}';
  assert.throws(() => t.handle(text), /integer 9007199254740993, beyond what JavaScript holds exactly/);
  // The thread is unchanged and still round-trips.
  const again = Thread.fromJSON(t.toJSON());
  assert.equal(again.handle({ type: 'Validated', findings: [{ noTranslations: {} }], evidence: { id: 1 }, now: 1_700_000_002_000 }).status, 'NOT_COVERED');
});
