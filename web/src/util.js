// DOM helpers. Everything that comes from the server, the LLM or a loaded file goes in as
// text (never as HTML): answers and prompts are untrusted.

/** h('div', {class: 'x', onclick: fn}, child, 'text', [more]) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** How a thread's outcome status is shown (the badge names). */
export const OUTCOME_LABELS = {
  VALID: 'VALID',
  VALID_WITH_WARNING: 'VALID with warning',
  MAX_ITERATIONS: 'NOT VERIFIED',
  IMPOSSIBLE: 'IMPOSSIBLE',
  NOT_COVERED: 'NOT COVERED',
  ERROR: 'ERROR',
  TOOL_CALL: 'TOOL CALL',
};

const OUTCOME_HINTS = {
  VALID: 'The answer was proved consistent with the policy.',
  VALID_WITH_WARNING: 'Proved, with a warning about the question or the answer.',
  MAX_ITERATIONS: 'No rewrite was proved valid within the maximum number of iterations.',
  IMPOSSIBLE: 'The question\'s premises contradict the policy.',
  NOT_COVERED: 'The policy does not cover this question.',
  ERROR: 'The thread failed.',
  TOOL_CALL: 'The chatbot called the app\'s tools; the answer that follows the tool results is verified.',
};

export function outcomeBadge(status) {
  if (!status) return null;
  const cls = { VALID: 'ok', VALID_WITH_WARNING: 'warn', MAX_ITERATIONS: 'bad', IMPOSSIBLE: 'bad', NOT_COVERED: 'neutral', ERROR: 'bad' }[status] || 'neutral';
  return h('span', { class: `badge ${cls}`, title: OUTCOME_HINTS[status] || status, 'data-verdict': status }, OUTCOME_LABELS[status] || status);
}

/** Badge for a finding kind / aggregate verdict (VALID, INVALID, SATISFIABLE, ...). */
export function kindBadge(kind) {
  const cls = { VALID: 'ok', INVALID: 'bad', IMPOSSIBLE: 'bad', SATISFIABLE: 'warn', TRANSLATION_AMBIGUOUS: 'warn' }[kind] || 'neutral';
  return h('span', { class: `badge ${cls}` }, (kind || '?').replace(/_/g, ' '));
}

export const STATUS_LABELS = { processing: 'processing', awaiting_input: 'awaiting input', done: 'done', error: 'error' };

export function statusChip(status) {
  return h('span', { class: `chip st-${status}` }, STATUS_LABELS[status] || status);
}

export function fmtTime(ms) {
  if (!ms) return '';
  try {
    return new Date(ms).toLocaleString();
  } catch {
    return String(ms);
  }
}

/** Finding union member -> {kind: 'VALID', body}. */
export function findingKind(f) {
  const [key] = Object.keys(f || {});
  const kinds = {
    valid: 'VALID', invalid: 'INVALID', satisfiable: 'SATISFIABLE', impossible: 'IMPOSSIBLE',
    translationAmbiguous: 'TRANSLATION_AMBIGUOUS', tooComplex: 'TOO_COMPLEX', noTranslations: 'NO_TRANSLATIONS',
  };
  return { kind: kinds[key] || (key ? `UNKNOWN (${key})` : 'UNKNOWN'), body: (f && f[key]) || {} };
}

// Characters that reorder or hide what is shown: bidirectional formatting characters,
// zero-width and other default-ignorable characters, and controls other than line breaks and
// tabs. A server-held trail can put them in a question, an answer or a thread id, so that
// what the auditor reads is not what was checked (`\u202E` shows "evif" as "five").
const HIDING = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF0-\uFFFB]|\uDB40[\uDC00-\uDFFF]|\uD834[\uDD73-\uDD7A]|\uD82F[\uDCA0-\uDCA3]|\uD80D[\uDC30-\uDC3F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `text` with every character that reorders or hides text written as a visible `\u{…}`
 * escape, the way `proofgate audit` prints it: for text read from a trail or a server. */
export function visible(text) {
  return String(text ?? '').replace(HIDING, (c) => `\\u{${c.codePointAt(0).toString(16).toUpperCase()}}`);
}

export function pre(text, cls) {
  return h('pre', { class: cls || 'code', tabindex: '0' }, text ?? '');
}

export function announce(msg) {
  const el = document.getElementById('conn');
  if (el) el.textContent = msg;
}
