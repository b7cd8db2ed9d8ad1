// The rewriting loop through the npm package: the example's full loop, input validation,
// persistence, defaults, and the audit trail of a thread driven from JavaScript.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Thread, replayAudit, verifyChain } from 'proofgate';
import { runLoop } from '../examples/loop.mjs';

const invalid = { invalid: { contradictingRules: [{ identifier: 'R1' }] } };
const valid = {
  valid: {
    translation: { claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] },
    supportingRules: [{ identifier: 'R1' }],
  },
};

test('the example drives a full loop to a verified answer that replays', () => {
  const lines = [];
  const { outcome, trail, report, steps } = runLoop({ log: (l) => lines.push(l) });
  assert.equal(outcome.type, 'Finish');
  assert.equal(outcome.status, 'VALID');
  assert.equal(outcome.verified, true);
  assert.equal(outcome.answer, 'In low season, as a visitor aged 70, you pay 5 dollars.');
  assert.equal(outcome.iterations, 3);
  assert.equal(report.ok, true);
  assert.equal(report.status, 'VALID');
  assert.equal(trail[0].kind, 'THREAD_STARTED');
  assert.equal(trail.at(-1).kind, 'VALID_RESPONSE');
  assert.deepEqual(trail.at(-1).body.clarifications[0].response,
    { status: 'ANSWERED', answers: ['Low season.'], at: trail.at(-1).body.clarifications[0].response.at });
  assert.deepEqual(steps.map((s) => s.purpose),
    ['INITIAL_ANSWER', 'REWRITE', 'REWRITE', 'REGENERATE_WITH_CLARIFICATIONS']);
  assert.equal(steps[1].validation.verdict.verdict, 'SATISFIABLE');
  assert.match(steps[2].prompt, /season \(The travel season: LOW or HIGH\): LOW when the claims hold/);
  assert.ok(lines.some((l) => l.includes('AWAITING_INPUT')));
});

test('a wrong input throws a clear error and leaves the thread unchanged', () => {
  const t = new Thread(null, 'How much?', 't-1', 1000);
  const before = JSON.stringify(t);
  assert.throws(() => t.handle({ type: 'UserAnswered', answers: ['x'], now: 1001 }),
    /state GENERATE_INITIAL and cannot take UserAnswered; it expects LlmReplied/);
  assert.throws(() => t.handle({ type: 'LlmReplied', txt: 'x' }), /the input is malformed: .*txt/);
  assert.equal(JSON.stringify(t), before);
  assert.equal(t.phase, 'GENERATE_INITIAL');
});

test('bad configurations are rejected with what was wrong', () => {
  assert.throws(() => new Thread({ maxIterations: 0 }, 'q'), /maxIterations must be at least 1/);
  assert.throws(() => new Thread({ maxIteration: 3 }, 'q'), /maxIteration/);
  assert.throws(() => new Thread(null, '   '), /question is empty/);
  assert.throws(() => new Thread(null, 'q', 'id', -5), /whole number of milliseconds/);
});

test('defaults: random id, the current time, inputs without now', () => {
  const t = new Thread(undefined, 'Can I bring my dog?');
  assert.match(t.id, /^[0-9a-f-]{36}$/);
  const first = t.start();
  assert.equal(first.type, 'CallLlm');
  assert.equal(first.purpose, 'INITIAL_ANSWER');
  assert.deepEqual(t.start(), first, 'start() re-issues the pending effect');
  const v = t.handle({ type: 'LlmReplied', text: 'Yes.' });
  assert.deepEqual(v, { type: 'Validate', question: 'Can I bring my dog?', answer: 'Yes.' });
  const done = t.handle({ type: 'Validated', findings: [valid, { noTranslations: {} }] });
  assert.equal(done.status, 'VALID_WITH_WARNING');
  assert.ok(Math.abs(t.auditTrail().at(-1).at - Date.now()) < 60_000);
});

test('always INVALID ends at the iteration limit, not verified', () => {
  const t = new Thread({ maxIterations: 2 }, 'q', 't-2', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  const rewrite = t.handle({ type: 'Validated', findings: [invalid], now: 2 });
  assert.equal(rewrite.purpose, 'REWRITE');
  assert.match(rewrite.prompt, /DECISION: REWRITE/);
  t.handle({ type: 'LlmReplied', text: 'DECISION: REWRITE\nANSWER: A2', now: 3 });
  const end = t.handle({ type: 'Validated', findings: [invalid], now: 4 });
  assert.equal(end.status, 'MAX_ITERATIONS');
  assert.equal(end.verified, false);
  assert.equal(end.answer, 'A2');
  assert.throws(() => t.handle({ type: 'Tick', now: 5 }), /already finished with MAX_ITERATIONS/);
  assert.equal(t.auditTrail().at(-1).kind, 'MAX_ITERATIONS_REACHED');
  assert.equal(replayAudit(t.auditTrail()).ok, true);
});

test('a policy is recorded once, as the document the trail names', () => {
  const policy = { rules: [{ id: 'R1', expression: '(= fee 5)', english: 'The fee is 5.' }], variables: [{ name: 'fee', description: 'The fee' }] };
  const t = new Thread({ maxIterations: 1, policy }, 'q', 't-doc', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  t.handle({ type: 'Validated', findings: [invalid], now: 2 });
  const trail = t.auditTrail();
  assert.match(trail[0].body.policyDocument, /^sha256:[0-9a-f]{64}$/);
  assert.ok(!JSON.stringify(trail).includes('The fee is 5.'));
  const documents = t.policyDocuments();
  assert.deepEqual(documents, [{ policy }]);
  assert.equal(replayAudit(trail, documents).ok, true);
  assert.equal(replayAudit(trail).failure.problem, 'POLICY_DOCUMENT_MISSING');
  // The thread resumes from its JSON, which keeps its configuration.
  const resumed = Thread.fromJSON(JSON.stringify(t.toJSON()));
  assert.deepEqual(resumed.policyDocuments(), documents);
});

test('questions time out through Tick, and the thread resumes from JSON text', () => {
  const t = new Thread({ questionTimeoutMs: 100 }, 'q', 't-3', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  t.handle({ type: 'Validated', findings: [{ satisfiable: {} }], now: 2 });
  const ask = t.handle({ type: 'LlmReplied', text: 'DECISION: ASK_QUESTIONS\nQUESTION: When?', now: 3 });
  assert.deepEqual(ask, { type: 'AskUser', questions: ['When?'], deadline: 103 });
  const resumed = Thread.fromJSON(JSON.stringify(t.toJSON()));
  assert.deepEqual(resumed.handle({ type: 'Tick', now: 50 }), ask);
  const regen = resumed.handle({ type: 'Tick', now: 103 });
  assert.equal(regen.purpose, 'REGENERATE_AFTER_SKIP');
  assert.equal(resumed.clarifications()[0].response.status, 'TIMED_OUT');
  assert.equal(verifyChain(resumed.auditTrail()).ok, true);
  assert.equal(replayAudit(resumed.auditTrail()).ok, true);
});

test('an IMPOSSIBLE explanation is validated before it is returned', () => {
  const t = new Thread(null, 'q', 't-4', 0);
  t.handle({ type: 'LlmReplied', text: 'A1', now: 1 });
  const p = t.handle({ type: 'Validated', findings: [{ impossible: {} }], now: 2 });
  assert.match(p.prompt, /DECISION: IMPOSSIBLE/);
  const v = t.handle({ type: 'LlmReplied', text: 'DECISION: IMPOSSIBLE\nANSWER: Cannot be both.', now: 3 });
  assert.deepEqual(v, { type: 'Validate', question: 'q', answer: 'Cannot be both.' });
  assert.equal(t.outcome(), undefined);
  const end = t.handle({ type: 'Validated', findings: [{ impossible: {} }], evidence: { smt: '(check-sat)' }, now: 4 });
  assert.equal(end.status, 'IMPOSSIBLE');
  assert.equal(t.auditTrail().at(-1).kind, 'IMPOSSIBLE_RESPONSE');
  assert.deepEqual(t.auditTrail().at(-1).body.evidence, { smt: '(check-sat)' });
});

test('text beyond ASCII crosses into wasm intact, as JSON text and as values', () => {
  const question = 'Ça coûte combien ? 料金は？ 🎟️';
  const policy = { rules: [{ id: 'R1', expression: '(= fee 5)', english: 'Le tarif est de 5 €.' }], variables: [{ name: 'fee', description: 'Le tarif (€)' }] };
  const t = Thread.withAnswer({ maxIterations: 1, policy }, question, { text: '5 € — ¡olé! 🎉', source: 'upstream' }, 't-utf8', 0);
  t.handle({ type: 'Validated', findings: [valid], now: 1 });
  const text = JSON.stringify(t.auditTrail());
  const documents = JSON.stringify(t.policyDocuments());
  assert.equal(replayAudit(text, documents).ok, true);
  assert.equal(replayAudit(t.auditTrail(), t.policyDocuments()).ok, true);
  assert.equal(Thread.fromJSON(JSON.stringify(t.toJSON())).toJSON().question, question);
  // One character for another of the same class is still a different record: the bytes
  // hashed are the text's own.
  const altered = replayAudit(text.replace('coûte', 'coùte'), documents);
  assert.equal(altered.failure.problem, 'HASH_MISMATCH');
  assert.equal(altered.failure.index, 0);
  const otherDocument = replayAudit(text, documents.replace('5 €', '5 £'));
  assert.equal(otherDocument.failure.problem, 'POLICY_DOCUMENT_MISSING');
});

test('Thread.withAnswer validates the given answer first and its trail replays', () => {
  const t = Thread.withAnswer(null, 'How much?', { text: '$7.', source: 'upstream' }, 't-given', 1000);
  assert.deepEqual(t.start(), { type: 'Validate', question: 'How much?', answer: '$7.' });
  const done = t.handle({ type: 'Validated', findings: [valid], now: 1001 });
  assert.equal(done.type, 'Finish');
  assert.equal(done.status, 'VALID');
  assert.equal(replayAudit(t.auditTrail()).ok, true);
  assert.throws(() => Thread.withAnswer(null, 'Q?', { text: ' ', source: 'user' }), /given answer is empty/);
});
