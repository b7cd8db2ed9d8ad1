// The chat view: threads, asking (or checking a pasted answer), follow-up questions answered
// in place or skipped, the final answer with its verdict, the read-only configuration, the
// debug panel and the proof view.
import * as api from './api.js';
import { h, clear, outcomeBadge, statusChip, fmtTime, announce, visible } from './util.js';
import { debugPanel } from './debug.js';
import { proofView } from './proof.js';
import { allows } from './keys.js';

const state = {
  threads: [],
  pendingAsk: null, // {question, answer, startedAt} while POST /api/threads runs the loop
  busy: null, // thread id while answers are being processed
  pollTimer: null,
  tickTimer: null,
  identity: null,
  policies: null,
  rules: {},
  lastConfig: null,
};

function stopTimers() {
  clearTimeout(state.pollTimer);
  clearInterval(state.tickTimer);
  state.pollTimer = null;
  state.tickTimer = null;
}

async function refreshList() {
  if (!allows('read')) {
    state.threads = [];
    state.listError = 'This key cannot list threads (it needs the read scope).';
    return;
  }
  try {
    state.threads = (await api.listThreads()).threads || [];
  } catch (e) {
    state.listError = e.message;
  }
}

async function loadServerInfo() {
  if (!state.identity) state.identity = await api.me().catch((e) => ({ error: e.message }));
  if (!state.policies) state.policies = await api.policies().catch((e) => ({ error: e.message }));
  if (!state.serverConfig) state.serverConfig = await api.serverConfig().catch(() => null);
  state.rules = await api.ruleIndex();
}

function threadList(selected) {
  const items = [];
  if (state.pendingAsk) {
    items.push(h('li', { class: 'thread-item pending' },
      h('span', { class: 'ti-q' }, state.pendingAsk.question), h('span', { class: 'ti-meta' }, statusChip('processing'))));
  }
  for (const t of state.threads) {
    items.push(h('li', { class: 'thread-item' },
      h('a', { href: `#/chat/${encodeURIComponent(t.id)}`, 'aria-current': t.id === selected ? 'page' : null, dataset: { thread: t.id } },
        h('span', { class: 'ti-q' }, t.question),
        h('span', { class: 'ti-meta' }, statusChip(state.busy === t.id ? 'processing' : t.status), ' ', outcomeBadge(t.verdict)))));
  }
  return h('nav', { class: 'threads', 'aria-label': 'Threads' },
    h('div', { class: 'threads-head' }, h('h2', {}, 'Threads'), h('a', { class: 'button primary', href: '#/chat', 'data-action': 'new' }, '+ New question')),
    state.listError ? h('p', { class: 'error' }, state.listError) : null,
    items.length ? h('ul', { class: 'thread-list' }, items) : h('p', { class: 'muted' }, 'No threads yet.'));
}

function configPanel(thread) {
  const cfg = thread?.config || state.lastConfig;
  const pol = state.policies?.policies?.[0];
  const models = [...new Set((thread?.steps || []).map((s) => s.reply?.model).filter(Boolean))];
  const ev = (thread?.steps || []).map((s) => s.validation?.evidence).find(Boolean);
  const row = (k, v) => [h('dt', {}, k), h('dd', {}, v ?? h('span', { class: 'muted' }, 'not reported by the server'))];
  return h('details', { class: 'config', open: window.innerWidth > 900 ? true : null },
    h('summary', {}, 'Configuration'),
    h('dl', {},
      row('Policy', pol ? [pol.file ? h('div', {}, pol.file) : null, h('code', { class: 'arn' }, pol.versionArn)] : state.policies?.error),
      row('Validator', state.serverConfig?.validator?.kind ?? state.identity?.validator),
      row('LLM model', models.length ? models.join(', ') : null),
      row('LLM endpoint', state.serverConfig ? `${state.serverConfig.rewriter.baseUrl}${state.serverConfig.rewriter.model ? ` (${state.serverConfig.rewriter.model})` : ''}` : null),
      row('Max iterations', cfg?.maxIterations),
      row('Follow-up questions', cfg?.followUpQuestions),
      row('Question timeout', cfg?.questionTimeoutMs ? `${Math.round(cfg.questionTimeoutMs / 60000)} min` : cfg ? 'none' : null),
      row('Translators (k)', state.serverConfig?.validator?.translators?.length ?? ev?.translators),
      row('Confidence threshold', state.serverConfig?.validator?.confidenceThreshold),
      row('When validation fails', state.serverConfig ? (state.serverConfig.failureMode === 'open' ? 'fail open (answers marked UNVERIFIED)' : 'fail closed (no unverified answer)') : null)),
    h('p', { class: 'muted small' }, 'Max iterations and follow-up questions can be set per thread (Settings for this thread, when asking). The policy, validator, LLMs and threshold come from the server\'s configuration file (or PROOFGATE_* variables).'));
}

function askForm() {
  const q = h('textarea', { id: 'question', name: 'question', rows: '3', required: true, placeholder: 'e.g. I am 70. How much will I pay in total for admission?' });
  const a = h('textarea', { id: 'answer', name: 'answer', rows: '3', placeholder: 'Paste an answer to check against the policy instead of generating one' });
  const err = h('p', { class: 'error', role: 'alert' });
  const defaults = state.lastConfig || {};
  const maxIt = h('input', { id: 'max-iterations', type: 'number', min: '1', max: '20', value: String(defaults.maxIterations || 5) });
  const allowQ = h('input', { id: 'allow-questions', type: 'checkbox', checked: defaults.followUpQuestions === 'DISABLED' ? null : true });
  const form = h('form', { class: 'ask', 'aria-labelledby': 'ask-title' },
    h('h2', { id: 'ask-title', tabindex: '-1' }, 'Ask a question'),
    h('label', { for: 'question' }, 'Question'), q,
    h('details', {}, h('summary', {}, 'Check an answer of your own'), h('label', { for: 'answer' }, 'Answer to check (optional)'), a),
    h('details', { class: 'thread-settings' }, h('summary', {}, 'Settings for this thread'),
      h('label', { for: 'max-iterations' }, 'Max iterations (validations, 1 to 20)'), maxIt,
      h('label', { class: 'checkbox' }, allowQ, ' Allow follow-up questions')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', 'data-action': 'ask' }, 'Ask')),
    err);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const question = q.value.trim();
    if (!question) {
      err.textContent = 'Write a question first.';
      q.focus();
      return;
    }
    state.pendingAsk = { question, answer: a.value.trim() || null, startedAt: Date.now() };
    rerender();
    announce('Processing the question…');
    try {
      const n = Number(maxIt.value);
      const settings = {
        ...(Number.isInteger(n) && n >= 1 && n <= 20 ? { maxIterations: n } : {}),
        followUpQuestions: allowQ.checked ? 'ALLOWED' : 'DISABLED',
      };
      const t = await api.createThread(question, state.pendingAsk.answer, settings);
      state.pendingAsk = null;
      await refreshList();
      announce(`Thread ${t.status.replace('_', ' ')}`);
      location.hash = `#/chat/${encodeURIComponent(t.id)}`;
    } catch (e) {
      state.pendingAsk = null;
      rerender();
      const f = document.querySelector('form.ask');
      if (f) {
        f.querySelector('#question').value = question;
        f.querySelector('p.error').textContent = `Could not ask: ${e.message}`;
      }
    }
  });
  return form;
}

function processingView() {
  const p = state.pendingAsk;
  const elapsed = h('span', { class: 'elapsed' }, '0 s');
  clearInterval(state.tickTimer);
  state.tickTimer = setInterval(() => { elapsed.textContent = `${Math.round((Date.now() - p.startedAt) / 1000)} s`; }, 500);
  return h('section', { class: 'conversation-body', 'aria-busy': 'true' },
    h('h2', { tabindex: '-1' }, p.question),
    h('div', { class: 'msg user' }, h('div', { class: 'who' }, 'You'), p.question),
    p.answer ? h('div', { class: 'msg user' }, h('div', { class: 'who' }, 'Answer to check'), p.answer) : null,
    h('div', { class: 'msg bot processing', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }),
      statusChip('processing'), ' The server is generating, validating and rewriting the answer… ', elapsed));
}

// Follow-up questions are the rewriting LLM's words, checked by nothing (a question can carry
// a claim): said wherever they are shown, as the API's chat text says it.
function questionsNotice() {
  return h('p', { class: 'muted small', 'data-notice': 'questions' }, 'These questions are not verified against the policy; the answer that follows is checked, and marked if it could not be verified.');
}

function questionsForm(thread) {
  const qs = thread.pending?.questions || [];
  const inputs = qs.map((q, i) => h('input', { type: 'text', id: `fq-${i}`, name: `fq-${i}`, autocomplete: 'off' }));
  const err = h('p', { class: 'error', role: 'alert' });
  const busy = state.busy === thread.id;
  async function send(skip) {
    const answers = inputs.map((x) => x.value.trim());
    if (!skip && answers.every((x) => !x)) {
      err.textContent = 'Answer at least one question, or skip them.';
      inputs[0]?.focus();
      return;
    }
    state.busy = thread.id;
    rerender();
    announce(skip ? 'Skipping the questions…' : 'Sending your answers…');
    try {
      await (skip ? api.skipThread(thread.id) : api.answerThread(thread.id, answers));
      state.busy = null;
      await refreshList();
      await rerender({ focusHeading: true });
      announce('Answers processed');
    } catch (e) {
      state.busy = null;
      await rerender();
      const el = document.querySelector('form.followup p.error');
      if (el) el.textContent = `Could not send: ${e.message}`;
    }
  }
  const form = h('form', { class: 'followup msg bot', 'aria-labelledby': 'fq-title' },
    h('h3', { id: 'fq-title' }, 'The assistant needs a few facts to answer'),
    qs.map((q, i) => h('div', { class: 'field' }, h('label', { for: `fq-${i}` }, q), inputs[i])),
    questionsNotice(),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', disabled: busy ? true : null, 'data-action': 'send-answers' }, busy ? 'Processing…' : 'Send answers'),
      h('button', { type: 'button', onclick: () => send(true), disabled: busy ? true : null, 'data-action': 'skip' }, 'Skip questions')),
    thread.pending?.deadline ? h('p', { class: 'muted small' }, `Unanswered questions are skipped at ${fmtTime(thread.pending.deadline)}.`) : null,
    err);
  form.addEventListener('submit', (ev) => { ev.preventDefault(); send(false); });
  return form;
}

function conversation(thread, showProof) {
  const o = thread.outcome;
  const msgs = [h('div', { class: 'msg user' }, h('div', { class: 'who' }, 'You'), thread.question)];
  for (const c of thread.clarifications || []) {
    msgs.push(h('div', { class: 'msg bot' }, h('div', { class: 'who' }, 'Assistant'), h('p', {}, 'Before answering, I need to know:'), h('ol', {}, c.questions.map((q) => h('li', {}, q))),
      questionsNotice()));
    if (c.response?.status === 'ANSWERED') msgs.push(h('div', { class: 'msg user' }, h('div', { class: 'who' }, 'You'), h('ol', {}, c.response.answers.map((a) => h('li', {}, a)))));
    else if (c.response) msgs.push(h('div', { class: 'msg user muted' }, c.response.status === 'SKIPPED' ? 'Skipped the questions.' : 'The questions timed out.'));
  }
  if (thread.status === 'awaiting_input' && thread.pending) msgs.push(questionsForm(thread));
  if (o) {
    msgs.push(h('div', { class: `msg bot final v-${(o.status || '').toLowerCase()}`, 'data-testid': 'final-answer' },
      h('div', { class: 'who' }, 'Assistant ', outcomeBadge(o.status), o.verified ? h('span', { class: 'muted small' }, ' · proved') : null),
      o.answer ? h('p', { class: 'answer-text' }, o.answer) : null,
      o.warning ? h('p', { class: 'warning' }, h('strong', {}, 'Warning: '), o.warning) : null,
      o.reason ? h('p', { class: 'error' }, o.reason) : null,
      h('p', { class: 'muted small' }, `${o.iterations} iteration${o.iterations === 1 ? '' : 's'}`)));
  }
  const canProve = o && (o.status === 'VALID' || o.status === 'VALID_WITH_WARNING');
  const base = `#/chat/${encodeURIComponent(thread.id)}`;
  return h('section', { class: 'conversation-body', 'aria-busy': state.busy === thread.id ? 'true' : 'false' },
    h('h2', { tabindex: '-1', class: 'thread-title' }, thread.question),
    h('p', { class: 'thread-meta' }, statusChip(state.busy === thread.id ? 'processing' : thread.status), ' ', outcomeBadge(thread.verdict),
      h('span', { class: 'muted small' }, ` · ${fmtTime(thread.createdAt)}`)),
    h('div', { class: 'messages' }, msgs),
    h('div', { class: 'actions thread-actions' },
      canProve ? h('a', { class: 'button primary', href: showProof ? base : `${base}/proof`, 'aria-expanded': showProof ? 'true' : 'false', 'data-action': 'proof' }, showProof ? 'Hide proof' : 'Show proof') : null,
      h('a', { class: 'button', href: `#/verify?url=${encodeURIComponent(api.auditUrl(thread.id))}`, 'data-action': 'verify' }, 'Verify audit trail'),
      h('button', { type: 'button', 'data-action': 'to-debug', onclick: () => { const d = document.getElementById('debug'); d?.scrollIntoView(); d?.focus(); } }, 'Go to the debug panel')),
    showProof && canProve ? proofView(thread, state.rules) : null);
}

let root = null;
let currentRoute = null;
// Each draw's number: a draw whose fetches a later draw overtook (a poll of the thread left,
// say) must not paint its thread over the later one.
let drawn = 0;

async function rerender(opts = {}) {
  if (root && currentRoute) await draw(root, currentRoute, opts);
}

/** Leaving the chat: its polls stop, and a draw still fetching paints nothing (a review found
 * a poll's draw replacing the verifier, and another thread's VALID answer shown under the
 * thread the URL names). */
export function leaveChat() {
  stopTimers();
  drawn++;
  currentRoute = null;
}

async function draw(main, r, opts) {
  const mine = ++drawn;
  const stale = () => mine !== drawn || currentRoute !== r;
  const selected = r.parts[0] || null;
  const showProof = r.parts[1] === 'proof';
  let thread = null;
  let loadError = null;
  if (selected) {
    try {
      const got = await api.getThread(selected);
      // The thread shown (its answer, its debug and configuration panels) and the one its
      // "Verify audit trail" link audits is the one this page asked for: a server answering
      // with another thread's id would send the auditor to a genuine trail of a thread that is
      // not this one (an audit review).
      if (got?.id !== selected) {
        throw new Error(`the server answered with thread ${visible(String(got?.id))}, not ${visible(selected)}`);
      }
      thread = got;
      if (thread.config) state.lastConfig = thread.config;
    } catch (e) {
      loadError = e.message;
    }
  }
  if (stale()) return;
  // The threads list follows a thread the server is working on, and its final status.
  if (thread && (thread.status === 'processing' || state.polling === thread.id)) await refreshList();
  if (stale()) return;
  const center = h('div', { class: 'center' });
  if (state.pendingAsk) center.appendChild(processingView());
  else if (!selected && !allows('chat')) {
    center.appendChild(h('section', { 'data-testid': 'no-chat-scope' }, h('h2', { tabindex: '-1' }, 'Ask a question'),
      h('p', {}, 'This key cannot ask questions (it needs the chat scope). ', h('a', { href: '#/key' }, 'Use another key'), '.')));
  } else if (!selected) center.appendChild(askForm());
  else if (loadError) center.appendChild(h('p', { class: 'error', role: 'alert' }, `Could not load the thread: ${loadError}`));
  else center.appendChild(conversation(thread, showProof));

  const debug = h('section', { class: 'debug', id: 'debug', 'aria-labelledby': 'debug-title', tabindex: '-1' },
    h('h2', { id: 'debug-title' }, 'Debug panel'),
    thread ? debugPanel(thread, state.rules) : h('p', { class: 'muted' }, 'Select a thread to see every iteration: prompts, answers, decisions and findings.'));

  // Keep the scroll position of the panels across live refreshes.
  const oldDebug = main.querySelector('.debug');
  const debugScroll = oldDebug ? oldDebug.scrollTop : 0;
  // Keep keyboard focus across live refreshes (the DOM is rebuilt): same id, or the heading.
  const had = document.activeElement;
  const focusSelector = had && main.contains(had)
    ? (had.id ? `#${CSS.escape(had.id)}` : had.classList.contains('thread-title') ? '.thread-title' : null)
    : null;
  // When a thread the server was working on settles, move focus to its heading.
  const settled = Boolean(thread) && state.polling === thread.id && thread.status !== 'processing';
  state.polling = thread?.status === 'processing' ? thread.id : null;
  if (settled) {
    opts = { ...opts, focusHeading: true };
    announce(`Thread ${thread.status.replace('_', ' ')}`);
  }
  const layout = h('div', { class: 'chat-layout' },
    h('aside', { class: 'side-col' }, threadList(selected), configPanel(thread)),
    center, debug);
  clear(main).appendChild(layout);
  if (opts.keepScroll) debug.scrollTop = debugScroll;
  if (opts.keepScroll && focusSelector && !opts.focusHeading) main.querySelector(focusSelector)?.focus({ preventScroll: true });

  if (opts.focusHeading) {
    const target = showProof ? main.querySelector('#proof-title') : (main.querySelector('.center h2'));
    target?.focus();
  }
  clearTimeout(state.pollTimer);
  // Live progress: a thread the server is still working on is polled until it settles.
  if (thread && thread.status === 'processing') {
    state.pollTimer = setTimeout(() => rerender({ keepScroll: true }), 400);
  } else if (state.pendingAsk) {
    state.pollTimer = setTimeout(async () => { await refreshList(); }, 1500);
  }
}

export async function renderChat(main, r, { sameView }) {
  stopTimers();
  root = main;
  currentRoute = r;
  if (!api.serverAvailable()) {
    clear(main).appendChild(h('section', { class: 'center narrow' }, h('h2', { tabindex: '-1' }, 'Chat'),
      h('p', {}, 'The chat needs a running proofgate server (proofgate serve). This page was opened from disk: the ',
        h('a', { href: '#/verify' }, 'audit verifier'), ' works offline.')));
    return;
  }
  await Promise.all([refreshList(), loadServerInfo()]);
  void sameView;
  if (currentRoute !== r) return; // left, or another thread chosen, while loading
  await draw(main, r, { focusHeading: true });
}
