// What the package takes from JavaScript before anything is recorded (a review): a string
// parameter given anything but a string (the release glue read it as ""), a translation
// vocabulary that does not load (refused only once a translation had been paid for), numbers
// JavaScript does not hold exactly written as floats, and inputs nested so deep that their
// records could not be read back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  Thread, Replayer, readApplyGuardrail, parseDecision, replayAudit, answerMatches, trailTextOf,
  planRechecks, policyDocumentsOf, recordHash, verifyTrust, verifyCheckpoint, auditNotChecked,
  logHeads,
} from 'proofgate';

const answer = 'You pay $5. Children under 12 enter free.';
/** An ApplyGuardrail response whose guardrail checked only the first sentence of `answer`. */
const partlyGuarded = {
  action: 'NONE',
  assessments: [{
    automatedReasoningPolicy: {
      findings: [{
        valid: {
          translation: { premises: [], claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] },
          supportingRules: [{ identifier: 'R1', policyVersionArn: 'arn:p:1' }],
        },
      }],
    },
    invocationMetrics: { guardrailCoverage: { textCharacters: { guarded: 11, total: 11 } } },
  }],
};
const given = { text: 'You pay $5.', source: 'app' };
const conversation = [{ role: 'user', text: 'How much?' }];

test('readApplyGuardrail refuses an answer that is not a string (it read as "", and a partly guarded answer as VALID)', () => {
  // The string itself: part of the answer was guarded by nothing.
  assert.equal(readApplyGuardrail(partlyGuarded, answer).type, 'Failed');
  // The ApplyGuardrail request's content block is an easy mistake for the answer.
  assert.throws(() => readApplyGuardrail(partlyGuarded, { text: answer, qualifiers: ['guard_content'] }),
    /answer \(the text sent as guard_content\) must be a string, got object/);
  for (const wrong of [42, true, null, undefined, [answer]]) {
    assert.throws(() => readApplyGuardrail(partlyGuarded, wrong), /answer .*must be a string/, String(wrong));
  }
  // A blank one has no characters for a guarded count to fall short of (`content.text ?? ''`).
  for (const blank of ['', '   ', '\n\t']) {
    assert.throws(() => readApplyGuardrail(partlyGuarded, blank), /answer is blank/, JSON.stringify(blank));
  }
});

test('a configuration that is not a plain object or JSON text is refused, not run as no policy', () => {
  for (const wrong of [Promise.resolve({}), new Map([['policy', 'x']]), [1], 42, true]) {
    for (const make of [
      () => new Thread(wrong, 'q', 't', 1),
      () => Thread.withAnswer(wrong, 'q', given, 't', 1),
      () => Thread.forReply(wrong, conversation, given, 't', 1),
    ]) {
      assert.throws(make, /the configuration must be a plain object or JSON text/, String(wrong));
    }
  }
  // One level down too: a policy not read yet reads as {}, a policy of no rules.
  for (const wrong of [Promise.resolve({}), new Map([['rules', []]]), {}]) {
    assert.throws(() => new Thread({ policy: wrong }, 'q', 't', 1), /policy has no rules and no variables/, String(wrong));
  }
  // Plain objects (with or without a prototype) and JSON text are read as before.
  assert.equal(new Thread({}, 'q', 't', 1).start().type, 'CallLlm');
  assert.equal(new Thread(Object.create(null), 'q', 't', 1).start().type, 'CallLlm');
  assert.equal(new Thread('{}', 'q', 't', 1).start().type, 'CallLlm');
});

/** A fresh instance of the browser build, under a TextEncoder that converts its argument to
 * a string as browsers' (Web IDL) does: Node's throws a TypeError for a non-string, which hid
 * what a page got. */
async function browserInstance() {
  class BrowserTextEncoder extends TextEncoder {
    encode(s = '') { return super.encode(String(s)); }
    encodeInto(s, into) { return super.encodeInto(String(s), into); }
  }
  const entry = new URL(import.meta.resolve('proofgate/web'));
  const saved = globalThis.TextEncoder;
  globalThis.TextEncoder = BrowserTextEncoder;
  try {
    // Its own module instance (the query), whose glue keeps the encoder it was loaded with.
    const web = await import(`${entry.href}?browser-encoder`);
    await web.default({ module_or_path: readFileSync(new URL('proofgate_bg.wasm', entry)) });
    return web;
  } finally {
    globalThis.TextEncoder = saved;
  }
}

test('in a browser, a non-string answer or thread id is refused, not read as ""', async () => {
  const web = await browserInstance();
  assert.equal(web.readApplyGuardrail(partlyGuarded, answer).type, 'Failed');
  // Read as "", no guarded count was too small and the partly guarded answer was VALID.
  assert.throws(() => web.readApplyGuardrail(partlyGuarded, { text: answer, qualifiers: ['guard_content'] }),
    /answer \(the text sent as guard_content\) must be a string, got object/);
  assert.throws(() => new web.Thread(null, 'q', 42), /threadId must be a string, got number/);
  assert.throws(() => web.Thread.withAnswer(null, 'q', given, Date.now()), /threadId must be a string/);
  assert.throws(() => new web.Thread(null, 42), /the question must be a string/);
  assert.throws(() => web.parseDecision(42), /text must be a string/);
  assert.equal(new web.Thread(null, 'q', 'page-thread', 1).id, 'page-thread');
});

test('readApplyGuardrail takes policyArns as an array (or nothing: any version), not a single ARN', () => {
  const covered = { ...partlyGuarded, assessments: [{ ...partlyGuarded.assessments[0], invocationMetrics: { guardrailCoverage: { textCharacters: { guarded: 11 } } } }] };
  for (const any of [undefined, null, []]) {
    assert.equal(readApplyGuardrail(covered, 'You pay $5.', any).type, 'Validated', String(any));
  }
  assert.equal(readApplyGuardrail(covered, 'You pay $5.', ['arn:p:1']).type, 'Validated');
  assert.equal(readApplyGuardrail(covered, 'You pay $5.', ['arn:p:2']).type, 'Failed');
  // A single string was read as the list of its characters.
  assert.throws(() => readApplyGuardrail(covered, 'You pay $5.', 'arn:p:1'),
    /policyArns must be an array of strings, got a single string/);
  assert.throws(() => readApplyGuardrail(covered, 'You pay $5.', [1]), /policyArns\[0\] must be a string, got a number/);
  assert.throws(() => readApplyGuardrail(covered, 'You pay $5.', { 0: 'arn:p:1' }), /policyArns must be an array/);
});

test('Thread constructors refuse a question, thread id or time of the wrong type', () => {
  for (const [make, why] of [
    [() => new Thread(null, 'q', 42), /threadId must be a string, got number/],
    [() => new Thread(null, 'q', { id: 'x' }), /threadId must be a string, got object/],
    [() => Thread.withAnswer(null, 'q', given, Date.now()), /threadId must be a string, got number/],
    [() => Thread.forReply(null, conversation, given, 7), /threadId must be a string, got number/],
    [() => new Thread(null, 42), /the question must be a string, got number/],
    [() => new Thread(null, { text: 'q' }), /the question must be a string, got object/],
    [() => Thread.withAnswer(null, 42, given), /the question must be a string, got number/],
    [() => new Thread(null, 'q', 't', '5'), /now must be a number/],
    [() => Thread.withAnswer(null, 'q', given, 't', '5'), /now must be a number/],
    [() => Thread.forReply(null, conversation, given, 't', '5'), /now must be a number/],
  ]) {
    assert.throws(make, why);
  }
  // Left out, or null: the defaults.
  const t = new Thread(null, 'q', null, null);
  assert.match(t.id, /^[0-9a-f-]{36}$/);
  assert.equal(Thread.withAnswer(undefined, 'q', given, 'mine').id, 'mine');
});

test('every other export taking a string refuses anything else, naming the parameter', () => {
  const t = new Thread(null, 'q', 't-args', 1);
  t.handle({ type: 'LlmReplied', text: 'A', now: 2 });
  const trail = t.auditTrail();
  const text = JSON.stringify(trail);
  assert.equal(parseDecision('DECISION: REWRITE\nANSWER: x').decision, 'REWRITE');
  assert.equal(answerMatches('unsat', 'unsat'), true);
  assert.equal(recordHash(JSON.stringify(trail[0])), trail[0].hash);
  for (const [call, why] of [
    [() => parseDecision(42), /text must be a string, got number/],
    [() => parseDecision({ text: 'x' }), /text must be a string, got object/],
    [() => answerMatches(0, 'sat'), /output .*must be a string/],
    [() => answerMatches('sat', true), /expected must be a string, got boolean/],
    [() => trailTextOf(trail), /trail's JSON text must be a string, got an array/],
    [() => planRechecks(trail, '{}'), /trail \(its JSON text\) must be a string/],
    [() => planRechecks(text, {}), /policy \(its JSON text\) must be a string/],
    [() => policyDocumentsOf({ rules: [] }), /policy \(its JSON text\) must be a string/],
    [() => recordHash(trail[0]), /record \(its JSON text\) must be a string/],
    [() => auditNotChecked(trail, {}), /trail \(its JSON text\) must be a string/],
    [() => verifyTrust({ trail }, 'key'), /bundle \(its JSON text\) must be a string/],
    [() => verifyTrust(text, 1), /verifierKey must be a string/],
    [() => verifyTrust(text, 'key', 5), /savedCheckpoint must be a string/],
    [() => verifyCheckpoint(1, 'key'), /checkpoint must be a string/],
    [() => verifyCheckpoint('note', null), /verifierKey must be a string, got null/],
    [() => logHeads({}, 'k', 'c', [], []), /bundle \(its JSON text\) must be a string/],
    [() => logHeads(text, 'k', 1, [], []), /currentCheckpoint must be a string/],
    [() => logHeads(text, 'k', 'c', 'proof', []), /proof must be an array of strings, got a single string/],
    [() => logHeads(text, 'k', 'c', [], [1]), /notes\[0\] must be a string/],
  ]) {
    assert.throws(call, why);
  }
});

test('replayAudit and Replayer take the policy documents as optional', () => {
  const t = new Thread(null, 'q', 't-opt', 1);
  t.handle({ type: 'LlmReplied', text: 'A', now: 2 });
  assert.equal(replayAudit(t.auditTrail()).ok, true);
  assert.equal(new Replayer().replay(t.auditTrail()).ok, true);
});

const badVocabulary = {
  translation: {
    translators: 1, repairAttempts: 0, requiredAgreement: 1,
    vocabulary: { types: [], variables: [{ name: 'x', type: 'Nope', description: 'x' }] },
  },
};
// The error the first translator reply got before (the LLM and translator calls paid for).
const vocabularyError = /invalid thread configuration: the translation vocabulary does not load: .*unknown type `Nope`/;

test('a translation vocabulary that does not load is refused when the thread is made', () => {
  assert.throws(() => new Thread(badVocabulary, 'q', 't', 1), vocabularyError);
  assert.throws(() => Thread.withAnswer(badVocabulary, 'q', given, 't', 1), vocabularyError);
  assert.throws(() => Thread.forReply(badVocabulary, conversation, given, 't', 1), vocabularyError);
  // One that loads is taken.
  const good = structuredClone(badVocabulary);
  good.translation.vocabulary.variables[0].type = 'INT';
  assert.equal(new Thread(good, 'q', 't', 1).start().type, 'CallLlm');
});

const valid = { valid: { translation: { claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] }, supportingRules: [{ identifier: 'R1' }] } };

test('an integer beyond 2^53 written as a float is refused, as one written as an integer is', () => {
  const fresh = () => {
    const t = new Thread(null, 'q', 't-float', 1);
    t.handle({ type: 'LlmReplied', text: 'A', now: 2 });
    return t;
  };
  const findings = JSON.stringify([valid]);
  for (const n of ['1e19', '-1e19', '9007199254740992.0', '9.9e20']) {
    const t = fresh();
    const before = JSON.stringify(t);
    assert.throws(() => t.handle(`{"type":"Validated","findings":${findings},"evidence":{"n":${n}},"now":3}`),
      /the input holds the integer .*beyond what JavaScript holds exactly/, n);
    assert.equal(JSON.stringify(t), before);
  }
  // Floats JavaScript holds as they are go through, and the trail reads back the same.
  // From 1e21 on JavaScript writes the exponent form too, and the float reads back the same.
  for (const n of ['0.5', '1e15', '1.0', '-2.5e-7', '9007199254740991.0', '1e21', '1.5e300']) {
    const t = fresh();
    assert.equal(t.handle(`{"type":"Validated","findings":${findings},"evidence":{"n":${n}},"now":3}`).status, 'VALID', n);
    assert.equal(replayAudit(JSON.parse(JSON.stringify(t.auditTrail()))).ok, true, n);
    assert.equal(Thread.fromJSON(JSON.stringify(t)).phase, 'COMPLETED', n);
  }
  // The constructors' configuration too: a vocabulary keeps members of its own.
  const config = '{"translation":{"translators":1,"repairAttempts":0,"requiredAgreement":1,"vocabulary":{"types":[],"variables":[],"note":1e19}}}';
  assert.throws(() => new Thread(config, 'q', 't', 1), /the configuration holds the integer 1e\+19, beyond/);
  assert.throws(() => Thread.withAnswer(config, 'q', given, 't', 1), /the configuration holds the integer 1e\+19, beyond/);
  assert.throws(() => Thread.forReply(config, conversation, given, 't', 1), /the configuration holds the integer 1e\+19, beyond/);
});

/** `{a: {a: ... 1}}`, `levels` objects deep. */
const nest = (levels) => { let v = 1; for (let i = 0; i < levels; i++) v = { a: v }; return v; };

test('an input nested deeper than 100 levels is refused; one at 100 is recorded and reads back', () => {
  // A finding's members sit deepest in the records: 7 levels of input around `x`.
  const input = (levels) => ({
    type: 'Validated',
    findings: [{ invalid: { translation: { claims: [{ logic: '(= fee 5)', x: nest(levels - 7) }] }, contradictingRules: [{ identifier: 'R1' }] } }],
    now: 3,
  });
  const fresh = () => {
    const t = new Thread({ maxIterations: 1 }, 'q', 't-deep', 1);
    t.handle({ type: 'LlmReplied', text: 'A', now: 2 });
    return t;
  };
  const t = fresh();
  assert.equal(t.handle(input(100)).status, 'MAX_ITERATIONS');
  assert.equal(replayAudit(t.auditTrail()).ok, true);
  assert.equal(replayAudit(JSON.stringify(t.auditTrail())).ok, true);
  assert.equal(Thread.fromJSON(JSON.stringify(t)).phase, 'COMPLETED');
  const u = fresh();
  assert.throws(() => u.handle(input(101)), /the input nests 101 levels deep, more than the 100/);
  assert.throws(() => u.handle({ type: 'Validated', findings: [valid], evidence: nest(100), now: 3 }), /nests 101 levels/);
  assert.equal(u.phase, 'VALIDATE');
  // The constructors' configuration, answer and conversation too.
  const deepConfig = (levels) => ({ policy: { rules: [], variables: [], x: nest(levels - 2) } });
  assert.throws(() => new Thread(deepConfig(101), 'q', 't', 1), /the configuration nests 101 levels deep/);
  assert.throws(() => Thread.forReply(null, [{ role: 'user', text: 'q', x: nest(99) }], given, 't', 1), /the conversation nests 101 levels deep/);
  assert.throws(() => Thread.withAnswer(null, 'q', { ...given, x: nest(100) }, 't', 1), /the answer nests 101 levels deep/);
});

test('findings the thread refuses end it as a failed validation fed as Failed (the README\'s recipe)', () => {
  const policy = { rules: [{ id: 'R1', expression: '(= fee 5)', english: 'The fee is 5.' }], variables: [{ name: 'fee', description: 'The fee' }] };
  for (const [failureMode, status] of [['CLOSED', 'ERROR'], ['OPEN', 'UNVERIFIED']]) {
    const t = Thread.withAnswer({ policy, failureMode }, 'How much?', given, 't-refused', 1);
    assert.equal(t.start().type, 'Validate');
    const foreign = { valid: { ...valid.valid, supportingRules: [{ identifier: 'R9' }] } };
    assert.throws(() => t.handle({ type: 'Validated', findings: [foreign], now: 2 }),
      /proofgate: the findings do not match the thread/);
    assert.equal(t.phase, 'VALIDATE');
    const end = t.handle({ type: 'Failed', reason: 'validator: its findings do not fit the thread', now: 3 });
    assert.equal(end.type, 'Finish');
    assert.equal(end.status, status);
    assert.equal(end.verified, false);
    assert.equal(replayAudit(t.auditTrail(), t.policyDocuments()).ok, true);
  }
});
