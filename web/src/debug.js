// The debug panel: every LLM call of a thread in order, with the prompt, the reply, the
// decision, the answer and, per iteration, the validation's findings.
import { h, kindBadge, pre, fmtTime } from './util.js';
import { findingView, checksFor } from './findings.js';

const PURPOSES = {
  INITIAL_ANSWER: 'Initial answer',
  REWRITE: 'Rewrite',
  REGENERATE_WITH_CLARIFICATIONS: 'Regenerate with the user\'s answers',
  REGENERATE_AFTER_SKIP: 'Regenerate after skipped questions',
};

function decisionView(d) {
  if (!d) return null;
  const label = { REWRITE: 'rewrite', ASK_QUESTIONS: 'ask questions', IMPOSSIBLE: 'impossible' }[d.decision] || d.decision;
  return h('div', { class: 'decision' },
    h('h5', {}, 'Decision: ', h('span', { class: `badge decision-${(d.decision || '').toLowerCase()}` }, label)),
    d.questions?.length ? h('ol', { class: 'questions' }, d.questions.map((q) => h('li', {}, q))) : null);
}

function stepView(step, i, rules) {
  const v = step.validation;
  const title = v ? `Iteration ${v.iteration}` : `Step ${i + 1}`;
  return h('article', { class: 'step', dataset: { step: String(i), iteration: v ? String(v.iteration) : '' } },
    h('h3', {}, title, ': ', PURPOSES[step.purpose] || step.purpose,
      step.addressing ? h('span', { class: 'muted' }, ' · addressing ', step.addressing.replace(/_/g, ' ')) : null),
    h('details', { class: 'prompt' }, h('summary', {}, `Prompt sent to the LLM (${step.prompt.length} characters)`), pre(step.prompt)),
    step.reply
      ? h('div', { class: 'reply' }, h('h5', {}, 'LLM reply', step.reply.model ? h('span', { class: 'muted' }, ` · ${step.reply.model} · ${fmtTime(step.reply.at)}`) : null), pre(step.reply.text, 'text'))
      : h('p', { class: 'muted' }, 'Waiting for the LLM…'),
    decisionView(step.decision),
    step.note ? h('p', { class: 'note' }, h('strong', {}, 'Note: '), step.note) : null,
    step.answer ? h('div', { class: 'answer' }, h('h5', {}, step.role === 'IMPOSSIBLE_EXPLANATION' ? 'Explanation checked' : 'Answer checked'), h('blockquote', {}, step.answer)) : null,
    v ? h('section', { class: 'validation', 'aria-label': `Validation of iteration ${v.iteration}` },
      h('h4', {}, 'Validation: ', kindBadge(v.verdict?.verdict), v.verdict?.warning ? h('span', { class: 'muted' }, ` · ${v.verdict.warning}`) : null,
        v.evidence?.validator ? h('span', { class: 'muted' }, ` · validator ${v.evidence.validator}${v.evidence.translators ? `, ${v.evidence.translators} translators` : ''}`) : null),
      premiseSourcesView(v.premiseSources),
      v.findings.length === 0 ? h('p', { class: 'muted' }, 'No findings.') : null,
      v.findings.map((f, j) => findingView(f, j, rules, checksFor(v.evidence, j))))
      : null);
}

/** Where each premise came from: the conversation turn (as numbered for the translators). */
function premiseSourcesView(sources) {
  if (!sources?.length) return null;
  return h('div', { class: 'premise-sources' },
    h('h5', {}, 'Premises and the turns they came from'),
    h('ul', {}, sources.map((s) => h('li', { dataset: { turn: s.turn ? String(s.turn) : '' } },
      h('code', {}, s.logic),
      s.naturalLanguage ? ` (${s.naturalLanguage})` : null,
      h('span', { class: 'muted' }, s.turn ? ` · turn ${s.turn}, ${s.role}` : ' · from the answer')))));
}

/** The app's conversation the answer was checked in, numbered as the translators saw it. */
function conversationView(turns) {
  if (!turns?.length) return null;
  return h('details', { class: 'conversation' },
    h('summary', {}, `Conversation (${turns.length} turn${turns.length === 1 ? '' : 's'}), the translators' context`),
    h('ol', {}, turns.map((t) => h('li', {}, h('strong', {}, `${t.role}: `), t.text))));
}

export function debugPanel(thread, rules) {
  const steps = thread.steps || [];
  const clar = thread.clarifications || [];
  return h('div', { class: 'debug-body' },
    h('p', { class: 'muted' }, `${thread.iterations} iteration${thread.iterations === 1 ? '' : 's'} · phase ${thread.phase}`),
    conversationView(thread.conversation),
    steps.length === 0 ? h('p', { class: 'muted' }, 'No steps yet.') : null,
    steps.map((s, i) => stepView(s, i, rules)),
    clar.length ? h('section', { class: 'clarifications' }, h('h3', {}, 'Follow-up questions'),
      clar.map((c) => h('div', { class: 'clar' },
        h('ol', {}, c.questions.map((q, k) => h('li', {}, q, c.response?.status === 'ANSWERED' && c.response.answers[k] !== undefined
          ? h('div', { class: 'user-answer' }, '→ ', c.response.answers[k]) : null))),
        h('p', { class: 'muted' }, c.response ? `${c.response.status.toLowerCase().replace('_', ' ')} · ${fmtTime(c.response.at)}` : 'waiting for the user')))) : null);
}
