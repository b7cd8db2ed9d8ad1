// Node tests of the npm package `proofgate`: the core functions through CommonJS, ESM and the
// browser (web target) glue. Run with `just test-node` (builds the package first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as esm from 'proofgate';
import initWeb, * as web from 'proofgate/web';

const require = createRequire(import.meta.url);
const cjs = require('proofgate');
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const awsBody = JSON.parse(
  readFileSync(here('../../core/tests/fixtures/apply-guardrail-all-findings.json'), 'utf8'),
);
const awsFindings = awsBody.assessments[0].automatedReasoningPolicy.findings;
const memberOf = (f) => Object.keys(f)[0];

test('require of the package directory works (the README one-liner)', () => {
  const pkg = require(here('../pkg'));
  const d = pkg.parseDecision('### DECISION: ASK_QUESTIONS\nQUESTION: a?\n- QUESTION: b?');
  assert.deepEqual(d, { decision: 'ASK_QUESTIONS', answer: '', questions: ['a?', 'b?'] });
});

for (const [name, pkg] of [['CommonJS', cjs], ['ESM', esm]]) {
  test(`${name}: parseDecision handles sloppy markdown`, () => {
    assert.deepEqual(pkg.parseDecision('**DECISION:** rewrite\r\n**Answer:** Yes.\r\n\r\nTwo.'), {
      decision: 'REWRITE',
      answer: 'Yes.\n\nTwo.',
      questions: [],
    });
    assert.deepEqual(pkg.parseDecision('no decision here'), {
      decision: 'REWRITE',
      answer: 'no decision here',
      questions: [],
    });
    assert.deepEqual(pkg.parseDecision('   '), { decision: 'REWRITE', answer: '', questions: [] });
    const many =
      'DECISION: ASK_QUESTIONS\n' + [1, 2, 3, 4, 5, 6, 7].map((i) => `QUESTION: q${i}?`).join('\n');
    assert.equal(pkg.parseDecision(many).questions.length, 5);
  });

  test(`${name}: prioritizeFindings orders AWS findings and keeps them intact`, () => {
    const shuffled = [...awsFindings].reverse();
    const out = pkg.prioritizeFindings(shuffled);
    assert.deepEqual(out.map(memberOf), [
      'translationAmbiguous',
      'impossible',
      'invalid',
      'satisfiable',
      'tooComplex',
      'noTranslations',
      'valid',
    ]);
    // Field for field unchanged.
    const byMember = Object.fromEntries(awsFindings.map((f) => [memberOf(f), f]));
    for (const f of out) assert.deepEqual(f, byMember[memberOf(f)]);
  });

  test(`${name}: aggregateVerdict`, () => {
    // A VALID names the rules that prove it; one that names none proved nothing of the policy.
    const shown = { claims: [{ logic: '(= fee 5)', naturalLanguage: 'You pay $5.' }] };
    const valid = { valid: { translation: shown, supportingRules: [{ identifier: 'R1' }] } };
    assert.deepEqual(pkg.aggregateVerdict([valid, valid]), { verdict: 'VALID' });
    assert.deepEqual(pkg.aggregateVerdict([valid, { noTranslations: {} }]), {
      verdict: 'VALID',
      warning: 'part of the answer is not covered by the policy',
    });
    assert.deepEqual(pkg.aggregateVerdict([{ valid: {} }]), { verdict: 'NO_TRANSLATIONS' });
    assert.deepEqual(pkg.aggregateVerdict([{ valid: { translation: shown, supportingRules: [] } }, valid]), {
      verdict: 'VALID',
      warning: 'part of the answer is not covered by the policy',
    });
    assert.deepEqual(pkg.aggregateVerdict([]), { verdict: 'NO_FINDINGS' });
    assert.deepEqual(pkg.aggregateVerdict([valid, { provenByMagic: {} }]), {
      verdict: 'UNKNOWN',
    });
    assert.deepEqual(pkg.aggregateVerdict(awsFindings), { verdict: 'TRANSLATION_AMBIGUOUS' });
  });

  test(`${name}: malformed findings throw an Error that says what was wrong`, () => {
    assert.throws(() => pkg.aggregateVerdict('not a list'), /findings list is malformed/);
    assert.throws(() => pkg.prioritizeFindings([{ valid: {}, invalid: {} }]), /exactly one member/);
    assert.throws(() => pkg.aggregateVerdict([{}]), /found none/);
  });
}

test('web target loads from bytes, as a browser would from a URL', async () => {
  const bytes = readFileSync(here('../pkg/web/proofgate_bg.wasm'));
  await initWeb({ module_or_path: bytes });
  assert.equal(web.parseDecision('DECISION: IMPOSSIBLE\nYou cannot be both.').decision, 'IMPOSSIBLE');
  assert.deepEqual(web.aggregateVerdict([{ invalid: {} }, { valid: {} }]), { verdict: 'INVALID' });
});

test('checksPassed judges anyOf groups as proofgate audit does', () => {
  const check = (anyOf) => ({ record: 1, finding: 0, kind: 'PAIR_COVERED', meaning: 'm', script: 's', expected: 'unsat', ...(anyOf === undefined ? {} : { anyOf }) });
  const checks = [check(), check(3), check(3), check(7), check(7)];
  // The lone check fails on its own; group 3 passes through one member; group 7 fails.
  assert.deepEqual(
    Array.from(cjs.checksPassed(checks, Uint8Array.from([0, 0, 1, 0, 0]))),
    [0, 1, 1, 0, 0],
  );
  // A check with no answer given has not passed.
  assert.deepEqual(Array.from(cjs.checksPassed(checks, Uint8Array.from([1]))), [1, 0, 0, 0, 0]);
  assert.throws(() => cjs.checksPassed([{ kind: 1 }], Uint8Array.from([1])), /list of checks is malformed/);
  // Only true/1 passes; -1 (an indexOf miss, 255 as a byte) is refused, not read as passed.
  assert.deepEqual(Array.from(cjs.checksPassed(checks, [true, false, false, false, false])), [1, 0, 0, 0, 0]);
  assert.throws(() => cjs.checksPassed(checks, [-1, -1, -1, -1, -1]), /answered\[0\] is not true or false/);
  assert.throws(() => cjs.checksPassed(checks, [2]), /answered\[0\] is not true or false/);
  for (const bad of [[257], [1.5], ['1'], [-255]]) {
    assert.throws(() => cjs.checksPassed(checks, bad), /answered\[0\] is not true or false/, JSON.stringify(bad));
  }
});
