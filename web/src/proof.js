// The proof view of a VALID answer: premises, claims, supporting rules, and a "check it
// yourself" action that re-runs the recorded logic with Z3 in the page. Those scripts are the
// server's, stored with the thread: the view says so and links to the audit verifier, which
// rebuilds every check from the auditor's own policy.
import { h, findingKind, outcomeBadge } from './util.js';
import { translationView, rulesView, scenariosSideBySide, checksView, checksFor } from './findings.js';
import { aggregateVerdict } from './core.js';

/** Whether a VALID finding proves something by the core's rules: it shows its translation,
 * names a supporting rule, and carries no logic warning that leaves the proof in doubt. */
function proves(finding) {
  try {
    return aggregateVerdict([finding]).verdict === 'VALID';
  } catch {
    return false;
  }
}

/** The validation of the final answer (the last step whose validated answer is the outcome's). */
function finalValidation(thread) {
  const steps = thread.steps || [];
  for (let i = steps.length - 1; i >= 0; i--) {
    const v = steps[i].validation;
    if (v && (!thread.outcome?.answer || steps[i].answer === thread.outcome.answer)) return v;
  }
  return null;
}

export function proofView(thread, rules) {
  const outcome = thread.outcome;
  const v = finalValidation(thread);
  const findings = (v?.findings || outcome?.findings || []).map((f, i) => ({ f, i, ...findingKind(f) }));
  const valid = findings.filter((x) => x.kind === 'VALID' && proves(x.f));
  const unproved = findings.filter((x) => x.kind === 'VALID' && !proves(x.f)).map(({ i }) => i + 1);
  return h('section', { class: 'proof', id: 'proof', 'aria-labelledby': 'proof-title' },
    h('h2', { id: 'proof-title', tabindex: '-1' }, 'Proof of the answer ', outcomeBadge(outcome?.status)),
    h('blockquote', { class: 'final' }, outcome?.answer || ''),
    h('p', {}, 'The answer was translated into logic; the solver proved that the policy\'s rules together with the premises entail every claim: ',
      h('code', {}, 'M ∧ P ∧ ¬C'), ' is unsatisfiable (no case satisfies the rules and premises but not the claims), and ', h('code', {}, 'M ∧ P ∧ C'), ' is satisfiable (the claims are consistent).'),
    valid.length === 0 ? h('p', { class: 'muted' }, 'This thread has no VALID finding to prove.') : null,
    unproved.length
      ? h('p', { class: 'muted' }, `Not shown as proof: finding ${unproved.join(', ')}, VALID by the validator's word, `
        + 'shows no translation, names no supporting rule or carries a logic warning, so it proves nothing of the policy.')
      : null,
    valid.map(({ body, i }) => h('article', { class: 'proof-finding' },
      h('h3', {}, `Finding ${i + 1}`),
      translationView(body.translation),
      rulesView('Supporting rules', body.supportingRules, rules),
      scenariosSideBySide('A scenario where everything holds', [{ title: 'Value', scenario: body.claimsTrueScenario }]),
      h('h4', {}, 'Check it yourself'),
      h('p', { class: 'muted small', 'data-trust': 'recorded' },
        'These are the solver scripts the server stored with this thread: Z3 here re-runs them, which shows their answers '
        + 'reproduce, not that they check your policy. To check without trusting anything the server stored, ',
        h('a', { href: `#/verify?url=${encodeURIComponent(`/api/threads/${encodeURIComponent(thread.id)}/audit/bundle`)}`, 'data-action': 'audit' },
          'verify the audit bundle'),
        ' with your copy of the policy: the verifier rebuilds every check from it.'),
      checksFor(v?.evidence, i)
        ? checksView(checksFor(v.evidence, i), { caption: 'The recorded logic, re-run by Z3 in this page', buttonLabel: 'Check it yourself with Z3', primary: true })
        : h('p', { class: 'muted' }, 'No SMT-LIB was recorded for this finding (the validator did not provide it, e.g. Amazon Bedrock).'))));
}
