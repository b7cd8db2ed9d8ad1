// An app that calls Amazon Bedrock's ApplyGuardrail itself and drives the loop with the npm
// package reads the response with readApplyGuardrail, as the proxy reads it: a guardrail that
// intervened blocks the answer, findings about part of the answer fail the validation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Thread, readApplyGuardrail } from 'proofgate';

const answer = 'You pay $5.';
const response = (action, guarded) => ({
  action,
  assessments: [
    {
      automatedReasoningPolicy: {
        findings: [{
          valid: {
            translation: { premises: [], claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] },
            supportingRules: [{ identifier: 'R1', policyVersionArn: 'arn:p:1' }],
          },
        }],
      },
      invocationMetrics: { guardrailCoverage: { textCharacters: { guarded, total: 40 } } },
    },
    ...(action === 'GUARDRAIL_INTERVENED' ? [{ contentPolicy: { filters: [{ type: 'VIOLENCE', action: 'BLOCKED' }] } }] : []),
  ],
});

/** A thread whose first answer is `answer`, validated by `input`. */
function validated(input) {
  const t = new Thread(null, 'How much?', 't-g', 1);
  t.handle({ type: 'LlmReplied', text: answer, now: 2 });
  return t.handle({ ...input, now: 3 });
}

test('a response whose guardrail intervened blocks the answer, whatever its findings', () => {
  const input = readApplyGuardrail(response('GUARDRAIL_INTERVENED', 11), answer);
  assert.equal(input.type, 'Blocked');
  assert.match(input.reason, /contentPolicy/);
  const effect = validated(input);
  assert.equal(effect.type, 'Finish');
  assert.equal(effect.verified, false);
  assert.equal(effect.status, 'ERROR');
  // The findings handed over as they are would have been verified: what the reader is for.
  const raw = validated({ type: 'Validated', findings: response('GUARDRAIL_INTERVENED', 11).assessments[0].automatedReasoningPolicy.findings });
  assert.equal(raw.verified, true);
});

test('findings about part of the answer, or on another policy version, fail the validation', () => {
  for (const [input, why] of [
    [readApplyGuardrail(response('NONE', 4), answer), /guarded 4 of the answer's 11 characters/],
    [readApplyGuardrail(JSON.stringify(response('NONE', 11)), answer, ['arn:p:2']), /not one of/],
  ]) {
    assert.equal(input.type, 'Failed');
    assert.match(input.reason, why);
    const effect = validated(input);
    assert.equal(effect.type, 'Finish');
    assert.equal(effect.verified, false);
  }
});

test('a response that covers the answer reads as its findings', () => {
  const input = readApplyGuardrail(response('NONE', 11), answer, ['arn:p:1']);
  assert.equal(input.type, 'Validated');
  assert.equal(input.findings.length, 1);
  assert.equal(validated(input).verified, true);
  const all = JSON.parse(readFileSync(new URL('../../core/tests/fixtures/apply-guardrail-all-findings.json', import.meta.url)));
  const read = readApplyGuardrail(all, 'x');
  assert.equal(read.type, 'Validated');
  assert.equal(read.findings.length, all.assessments.flatMap((a) => a.automatedReasoningPolicy?.findings ?? []).length);
  assert.throws(() => readApplyGuardrail('[1', answer), /ApplyGuardrail response/);
});
