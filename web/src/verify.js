// The audit verifier: loads a trail or audit bundle (file, paste or URL) and, in the page,
// checks its hash chain and replays every decision with the proofgate core (wasm); rebuilds
// every finding's solver checks from the auditor's own policy (never from scripts stored in
// the trail) and runs them with Z3; and, with the server's verifier key, checks the signed head,
// the trail's inclusion in the append-only log and (with a saved checkpoint) the log's
// consistency. Works from static files; without cross-origin isolation Z3 is reported
// unavailable and the other checks still run.
import { h, clear, fmtTime, pre, announce, visible } from './util.js';
import * as api from './api.js';
import { wasm, verifyChain, replayAudit, planRechecks, answerMatches, verifyTrust, policyDocumentsOf, trailTextOf, auditFormatVersion, checksPassed, auditNotChecked, logHeads, verifyCheckpoint } from './core.js';
import { runScript, z3Unavailable } from './z3.js';

const PROBLEMS = {
  EMPTY: 'the trail is empty',
  MALFORMED: 'the record is malformed',
  HASH_MISMATCH: 'hash mismatch',
  SEQ_MISMATCH: 'the record is out of sequence',
  BROKEN_LINK: 'the record does not link to the previous record\'s hash',
  UNSUPPORTED_VERSION: 'unsupported trail format version',
  REJECTED_INPUT: 'replaying this input was rejected by the loop',
  DIFFERS: 'replaying the loop produced something different from this record',
  MISSING: 'the trail ends before a record the loop requires',
  POLICY_DOCUMENT_MISSING: 'the policy this trail names is neither in the file nor your policy (load the audit bundle, which carries it, or your copy of the policy the thread ran with)',
  Z3_DIFFERS: 'Z3 in this page does not confirm the finding (checks rebuilt from your policy)',
  Z3_ERROR: 'Z3 could not run a check',
  POLICY: 'the finding cannot be confirmed against your policy',
  SIGNATURE: 'the trail does not end with the head the server signed',
};

const view = { source: null, text: null, result: null };
// What the auditor brings: the policy, the server's verifier key, a checkpoint saved earlier.
// A policy or key pre-filled from the audited server (`policyServed`, `keyServed`) is that
// server's word, not the auditor's: the checks run with it, but the audit is not full.
const auditor = { policy: null, policySource: null, policyServed: false, key: '', keyServed: false, servedKey: '', keyCleared: false, checkpoint: '', thread: '', logServer: '' };
// Each verification's token: a run superseded while it awaits Z3 (a policy loaded, another
// trail, another view) must neither write into the page nor announce its outcome.
let generation = 0;

// How each final outcome of the thread reads in a passing heading: a trail that replays
// intact proves the record, not that the thread's answer was verified.
const OUTCOMES = {
  VALID_WITH_WARNING: 'part of its answer is not covered by the policy',
  NOT_COVERED: 'nothing in its answer could be checked against the policy',
  IMPOSSIBLE: 'the question\'s premises contradict the policy; the answer is the explanation',
  MAX_ITERATIONS: 'the iteration limit was reached; its answer was not verified',
  UNVERIFIED: 'fail-open: its answer was not verified',
  ERROR: 'it failed, with no answer',
  TOOL_CALL: 'the chatbot called the app\'s tools; nothing was verified yet',
};

/** Accepts a bare array of records or an object holding one. */
function recordsOf(data) {
  if (Array.isArray(data)) return data;
  for (const k of ['trail', 'records', 'auditTrail', 'audit']) if (data && Array.isArray(data[k])) return data[k];
  throw new Error('expected a JSON array of audit records ({seq, prev, at, kind, body, hash})');
}

function mark(state, text) {
  const sym = { pass: '✓', fail: '✗', skip: '–', pending: '…' }[state];
  return h('span', { class: `mark ${state}` }, `${sym} ${text}`);
}

/** The SHA-256 of `text` in hex, or null where the page has no WebCrypto (a file: page). */
async function sha256Hex(text) {
  try {
    const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
    return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, '0')).join('');
  } catch { return null; }
}

/** The thread a URL of this server's API names (`/api/threads/<id>/audit...`), or null. */
function threadOfUrl(u) {
  const m = /\/api\/threads\/([^/?#]+)\/audit/.exec(u || '');
  try { return m ? decodeURIComponent(m[1]) : null; } catch { return null; }
}

/**
 * Reads the audited server's log (its current checkpoint, the consistency proof from the
 * bundle's, and every leaf's note) from `base` (the auditor's address for it; empty: this
 * page's server) and asks the core what it says of the bundle's trail: `{error}` when the log
 * could not be fetched, or is not one the key signs (another server's, as when this page is
 * the auditor's own: not checked), `{problem}` when what was fetched is signed but does not
 * hold (not extending the bundle's, or contradicting the trail: a failure), `{wentOn: {leaf,
 * seq}}` when the thread went on after the trail, or `{latest: true}`.
 */
async function latestHead(text, key, own, base = '') {
  const where = base ? `the log at ${base}` : 'the log this page\'s server serves';
  let current;
  let proof;
  const notes = [];
  try {
    const get = async (url) => {
      // The public routes are rate-limited per address: wait as told, a few times.
      for (let attempt = 1; ; attempt++) {
        const res = await fetch(`${base}${url}`);
        if (res.ok) return res;
        if (res.status !== 429 || attempt === 8) throw new Error(`GET ${base}${url}: HTTP ${res.status}`);
        const wait = Math.min(Math.max(Number(res.headers.get('retry-after')) || 1, 1), 60);
        await new Promise((r) => setTimeout(r, wait * 1000));
      }
    };
    current = await (await get('/api/log/checkpoint')).text();
    // Not signed by the key: not the audited server's log (the auditor's own server, or a
    // wrong address). Nothing more of it is read (its leaves could be many): not checked,
    // never a pass.
    let size;
    try {
      size = verifyCheckpoint(current, key).size;
    } catch (e) {
      return { error: `${where} is not signed by the verifier key you gave (${visible(e.message.replace(/^proofgate: /, ''))}): give the audited server's address` };
    }
    proof = (await (await get(`/api/log/consistency?from=${Math.min(own?.size ?? 0, size)}&to=${size}`)).json()).hashes || [];
    while (notes.length < size) {
      const page = await (await get(`/api/log/leaves?from=${notes.length}&to=${size}`)).json();
      const leaves = Array.isArray(page.leaves) ? page.leaves : [];
      if (!leaves.length) throw new Error(`the server lists no leaf ${notes.length} of ${size}`);
      for (const leaf of leaves.slice(0, size - notes.length)) {
        if (typeof leaf?.note !== 'string') throw new Error(`leaf ${notes.length} as listed has no note`);
        notes.push(leaf.note);
      }
    }
  } catch (e) {
    return { error: visible(e.message) };
  }
  try {
    const heads = logHeads(text, key, current, proof, notes);
    if (heads.kind === 'latest') return { latest: true, size: notes.length };
    if (heads.kind === 'wentOn') return { wentOn: heads, size: notes.length };
    return { problem: visible(heads.detail) };
  } catch (e) {
    return { problem: `${where} is not one its checkpoints sign: ${visible(e.message)}`, logFault: true };
  }
}

// Verifications under way: what the auditor brings may change while one awaits the log or
// Z3, before it has drawn anything.
let running = 0;

async function verify(text, source, out, urlThread = null) {
  running++;
  // The run verifyRun starts (it takes the next generation before its first await).
  const run = generation + 1;
  try {
    await verifyRun(text, source, out, urlThread);
  } catch (e) {
    // Whatever a hostile file makes this page trip over is a failure shown as one, never a
    // blank page or a pass drawn before the error; unless a later run has the page now.
    if (run !== generation) return;
    clear(out);
    out.appendChild(h('div', { class: 'verdict-box fail', role: 'alert', 'data-outcome': 'fail' },
      h('h3', {}, '✗ This trail could not be verified'), h('p', {}, visible(e?.message ?? e))));
  } finally {
    running--;
  }
}

async function verifyRun(text, source, out, urlThread) {
  const run = ++generation;
  await wasm();
  if (run !== generation) return;
  view.text = text;
  view.source = source;
  view.urlThread = urlThread;
  clear(out);
  // What the auditor brought when this verification started: the key field can change while
  // Z3 runs, and the summary must describe the checks that were actually made.
  const { policy, policyServed, key, keyServed, checkpoint } = auditor;
  // Without a scheme, an address is read as this page's own path: refuse to guess.
  const logServer = /^https?:\/\/[^/]/.test(auditor.logServer) ? auditor.logServer.replace(/\/+$/, '') : '';
  const ourPolicy = policyServed ? 'the policy this server serves' : 'your policy';
  // The thread being audited: the auditor's, or the one the URL asked for. A bundle shows only
  // that its trail is a logged head of some thread, so a server could hand out another's.
  const expectedThread = auditor.thread || urlThread || null;
  let records;
  let isBundle = false;
  let bundleCheckpoint = null;
  // The policy document the trail names (recorded once per policy version): a bundle carries
  // it, and the auditor's own policy makes it (when it is the policy the thread was shown).
  // Replay uses a document only under the hash of its own contents.
  let documents = [];
  if (policy) {
    try { documents = policyDocumentsOf(policy); } catch { /* reported by planRechecks below */ }
  }
  try {
    const data = JSON.parse(text);
    isBundle = !Array.isArray(data) && data && Array.isArray(data.trail);
    records = recordsOf(data);
    if (isBundle && typeof data.checkpoint === 'string') bundleCheckpoint = data.checkpoint;
    if (data && Array.isArray(data.policyDocuments)) documents = documents.concat(data.policyDocuments);
  } catch (e) {
    out.appendChild(h('div', { class: 'verdict-box fail', role: 'alert', 'data-outcome': 'fail' },
      h('h3', {}, '✗ Not a readable audit trail'), h('p', {}, visible(e.message))));
    return;
  }
  // The chain and the replay read the file's own bytes: `records` came through JSON.parse,
  // which rounds integers beyond 2^53, so a number changed to a neighbour of the signed one
  // would read back as the signed one.
  const trailText = trailTextOf(text);
  const chain = verifyChain(trailText);
  let replay;
  try {
    replay = replayAudit(trailText, documents);
  } catch (e) {
    out.appendChild(h('div', { class: 'verdict-box fail', role: 'alert', 'data-outcome': 'fail' },
      h('h3', {}, '✗ The bundle\'s policy documents are unreadable'), h('p', {}, visible(e.message))));
    return;
  }
  const threadId = replay.threadId || null;
  // Ids as shown: an invisible or reordering character in one is written out, so a thread
  // named like the audited one cannot pass for it on screen.
  const shownThread = threadId === null ? '(none)' : visible(threadId);
  const threadProblem = auditor.thread && urlThread && auditor.thread !== urlThread
    ? `you are auditing thread ${visible(auditor.thread)}, but the URL asked for thread ${visible(urlThread)}'s trail`
    : expectedThread && threadId !== expectedThread
      ? `this is thread ${shownThread}'s trail, not ${visible(expectedThread)}'s` : null;
  const firstStructural = [chain.failure, replay.failure].filter(Boolean).sort((a, b) => a.index - b.index)[0] || null;
  const structIdx = firstStructural ? firstStructural.index : Infinity;

  // The solver checks, rebuilt by the core from the recorded premises/claims and the auditor's
  // policy; the scripts stored in the trail are never run.
  let plan = null;
  let planError = null;
  // Also for a broken trail, so each record shows what of its logic holds: the core bounds
  // the checks a trail can ask for (`MAX_COVERAGE_CHECKS`), so a small hostile file cannot
  // make this tab plan hundreds of thousands.
  if (policy) {
    try { plan = planRechecks(text, policy); } catch (e) { planError = visible(e.message); }
  }
  const withChecks = [];
  for (const c of plan?.checks || []) {
    let wc = withChecks.find((x) => x.i === c.record);
    if (!wc) { wc = { i: c.record, checks: [] }; withChecks.push(wc); }
    wc.checks.push(c);
  }
  const totalChecks = withChecks.reduce((n, x) => n + x.checks.length, 0);
  const z3Why = totalChecks ? z3Unavailable() : null;
  // Signature, inclusion, consistency: only for bundles, with the server's verifier key.
  let trust = null;
  let trustError = null;
  if (key && isBundle) {
    try { trust = verifyTrust(text, key, checkpoint || undefined); } catch (e) { trustError = visible(e.message); }
  }
  const keyPrint = key && isBundle ? await sha256Hex(key) : null;
  // Whether this is its thread's latest head: a server can hand out an earlier head of the
  // thread, or one forked from it, as genuinely signed and logged; only the log's other leaves
  // show the thread went further. They are public, read from this server, and held by the core
  // to checkpoints the key verifies.
  const heads = trust?.ok && (logServer || api.serverAvailable()) ? await latestHead(text, key, trust.checkpoint, logServer) : null;
  if (run !== generation) return;

  const summary = h('div', { class: 'verdict-box pending', role: 'status', 'aria-live': 'polite' });
  const failureBox = h('div', { class: 'failure-box' });
  const rows = records.map((r, i) => {
    const chainCell = h('td', {});
    const logicCell = h('td', {});
    const why = h('div', { class: 'why' });
    let body = null;
    const det = h('details', {}, h('summary', {}, 'Record'));
    det.addEventListener('toggle', () => { if (det.open && !body) { body = pre(visible(JSON.stringify(r, null, 2))); det.appendChild(body); } });
    if (i < structIdx) chainCell.appendChild(mark('pass', 'hash, link, replay'));
    else if (i === structIdx) {
      chainCell.appendChild(mark('fail', firstStructural.problem));
      why.textContent = `${PROBLEMS[firstStructural.problem] || firstStructural.problem}: ${visible(firstStructural.detail)}`;
    } else chainCell.appendChild(mark('skip', 'after the first failure'));
    const wc = withChecks.find((x) => x.i === i);
    if (!wc) logicCell.appendChild(h('span', { class: 'muted' }, '—'));
    else if (z3Why) logicCell.appendChild(mark('skip', `Z3 unavailable (${wc.checks.length} checks)`));
    else logicCell.appendChild(mark('pending', `${wc.checks.length} checks`));
    // Each field as the file has it, whatever its type: the chain and replay judge the record,
    // and a number where a hash belongs must not stop the page from saying so.
    const kind = typeof r?.kind === 'string' ? visible(r.kind) : '?';
    const hash = typeof r?.hash === 'string' ? visible(r.hash) : '';
    const tr = h('tr', { id: `rec-${i}`, tabindex: '-1', dataset: { index: String(i), kind } },
      h('td', {}, Number.isSafeInteger(r?.seq) ? String(r.seq) : String(i)),
      h('td', {}, h('code', {}, kind), h('div', { class: 'muted small' }, typeof r?.at === 'number' ? fmtTime(r.at) : '')),
      h('td', {}, h('code', { class: 'hash', title: hash }, hash.slice(0, 8))),
      chainCell, logicCell, h('td', {}, why, det));
    const row = { tr, chainCell, logicCell, why, state: i < structIdx ? 'pass' : i === structIdx ? 'fail' : 'skip' };
    const problems = (plan?.problems || []).filter((p) => p.record === i);
    if (problems.length) {
      clear(logicCell).appendChild(mark('fail', 'not confirmable'));
      const text = `${PROBLEMS.POLICY}: ${problems.map((p) => visible(p.detail)).join('; ')}`;
      why.textContent = why.textContent ? `${why.textContent}. ${text}` : text;
      row.state = 'fail';
    }
    if (trust && !trust.signature.ok && i === records.length - 1) {
      const text = `${PROBLEMS.SIGNATURE}: ${visible(trust.signature.detail)}`;
      why.textContent = why.textContent ? `${why.textContent}. ${text}` : text;
      row.state = 'fail';
    }
    return row;
  });

  out.append(
    summary,
    failureBox,
    h('div', { class: 'table-wrap' }, h('table', { class: 'records' },
      h('caption', {}, `${records.length} records${source ? ` from ${source}` : ''}`),
      h('thead', {}, h('tr', {}, ['#', 'Kind', 'Hash', 'Chain and replay', 'Logic (Z3)', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((r) => r.tr)))));

  function trustLines() {
    if (!isBundle) return h('li', { 'data-check': 'signature' }, 'Signature and log not checked: this is a plain trail; load the audit bundle (/api/threads/<id>/audit/bundle).');
    if (!key) return h('li', { 'data-check': 'signature' }, 'Signature and log not checked: give the server\'s verifier key.');
    if (trustError) return h('li', { 'data-check': 'signature', class: 'fail' }, `Signature and log: ${trustError}`);
    const served = keyServed ? ' (with the key this server serves, not one you hold)' : '';
    const line = (name, label, c) => h('li', { 'data-check': name, class: c.ok ? 'pass' : 'fail' }, `${c.ok ? '✓' : '✗'} ${label}: ${c.detail}${served}`);
    return [
      // The whole key's digest, to compare with the one held: its name and 4-byte id alone
      // could be matched by another key.
      keyPrint ? h('li', { 'data-check': 'key' }, `Verifier key ${key.split('+').slice(0, 2).join('+')}, SHA-256 ${keyPrint}`) : null,
      line('signature', 'Signature', trust.signature),
      line('inclusion', 'Inclusion in the log', trust.inclusion),
      trust.consistency ? line('consistency', 'Consistency with your saved checkpoint', trust.consistency) : null,
      heads ? h('li', { 'data-check': 'heads', class: heads.problem ? 'fail' : heads.latest ? 'pass' : '' },
        heads.problem ? `✗ Latest head: ${heads.problem}`
          : heads.error ? `Latest head not checked: ${heads.error}`
            : heads.wentOn ? `Latest head: not this one; the thread went on after this trail (leaf ${heads.wentOn.leaf} logs its record ${heads.wentOn.seq})`
              : `✓ Latest head: no later head of this thread among the log's ${heads.size} leaves, the log as the server signs it now (one holding the key could sign an older view of it: compare its checkpoint with other auditors' to rule that out)`) : null,
    ];
  }

  // The checks that did not run, each with what the auditor must do for a full audit. Nothing
  // failing is not a pass: "pass" needs the chain and replay, the logic re-checked by Z3 from the
  // auditor's policy, and the signature and log inclusion checked with the verifier key.
  const notRun = [];
  const current = auditFormatVersion();
  // Which checks a full audit makes that this one did not is decided by the core
  // (`auditNotChecked`), as `proofgate audit` and the npm package decide it; this page adds
  // what only it can lack (an input the audited server served, Z3 unable to run here) and
  // says what to do in its own words.
  let gaps;
  let coreGaps;
  try {
    coreGaps = auditNotChecked(isBundle ? text : trailText, {
      threadNamed: !!expectedThread, policyGiven: !!policy, keyGiven: !!key, checkpointGiven: !!(checkpoint || '').trim(),
      // A checkpoint holds only the leaves it counts: the core compares its size with the
      // leaf of the trail's head (read from the bundle).
      checkpointSize: trust?.savedCheckpoint?.size,
      // Read, whatever it said: a problem fails the audit below.
      logScanned: !!(heads?.latest || heads?.problem),
    });
    gaps = new Set(coreGaps.map((g) => g.id));
  } catch (e) {
    // The core refuses what it cannot read as a trail or bundle (a key written twice, say),
    // as `proofgate audit` fails it: a failure, not a list of checks to add.
    clear(out);
    out.appendChild(h('div', { class: 'verdict-box fail', role: 'alert', 'data-outcome': 'fail' },
      h('h3', {}, '✗ Not a readable audit trail'), h('p', {}, visible(e.message))));
    return;
  }
  if (gaps.has('older-format')) {
    // Replay judges a trail by the rules of the format it was written in (README, "What a
    // record holds"): intact under weaker rules is a weaker statement.
    notRun.push({ id: 'older-format', what: `the trail was written in audit format ${replay.formatVersion}, whose rules are weaker than the current format ${current}'s`, todo: `a pass under it proves less (it replays by format ${replay.formatVersion}'s rules; the audit format list in proofgate's README says what they do not check), and nothing in this page can make up for that` });
  }
  if (gaps.has('policy')) {
    notRun.push({ id: 'policy', what: 'the logic was not re-checked (no policy loaded)', todo: 'load your copy of the policy' });
  } else {
    if (policyServed) {
      notRun.push({ id: 'policy-served', what: 'the logic was checked against the policy this server serves, not yours', todo: 'load the policy file you hold (your own copy, not one this server gave you)' });
    }
    if (!planError && totalChecks && z3Why) {
      notRun.push({ id: 'z3', what: 'the logic was not re-checked (Z3 cannot run in this page)', todo: 'open the verifier where Z3 can run: a page served with COOP/COEP (cross-origin isolated), e.g. the static files from the release on a host that sends those headers, or a proofgate serve of your own; not from disk or a plain static host' });
    }
  }
  if (gaps.has('thread')) {
    notRun.push({ id: 'thread', what: `which thread this is was not checked (the trail is thread ${shownThread}'s)`, todo: 'give the id of the thread you are auditing: a bundle shows only that its trail is a logged head of some thread, so a server could hand out another thread\'s' });
  }
  // Findings the validator made from its own translation (Amazon Bedrock) hold nothing to what
  // the user said: no translation is recorded to check the premises and the coverage against.
  if (gaps.has('validator-premises')) {
    notRun.push({ id: 'validator-premises', what: 'that the validator\'s translations say what the question and answer say, and that its findings cover the whole answer, were not checked (it translated them itself, as Amazon Bedrock does, so no translations are recorded to hold them to; from audit format 10 the premises of its VALIDs are held to the conversation\'s words, and the replay checked that)', todo: 'nothing in this page can check them: the findings are the validator\'s word (answers checked by proofgate\'s own reasoner record their translations, and are checked here)' });
  }
  const pasteKey = 'paste the server\'s verifier key you hold (obtained out of band, not from this server)';
  if (gaps.has('bundle')) {
    notRun.push({ id: 'bundle', what: 'the signature and log inclusion were not checked (a plain trail, not an audit bundle)', todo: `load the audit bundle (/api/threads/<id>/audit/bundle)${!key ? ' and give the server\'s verifier key' : keyServed ? ` and ${pasteKey}` : ''}` });
  } else if (gaps.has('key')) {
    notRun.push({ id: 'key', what: 'the signature and log inclusion were not checked (no verifier key)', todo: 'give the server\'s verifier key' });
  } else if (keyServed) {
    notRun.push({ id: 'key-served', what: 'the signature and log inclusion were checked with the verifier key this server serves, not one you hold', todo: pasteKey });
  }
  // A server holding its key can rebuild its whole log around a rewritten trail and sign it
  // anew: only a checkpoint saved before shows the log was not rewritten.
  if (gaps.has('checkpoint') && (checkpoint || '').trim() && trust?.savedCheckpoint && trust?.headLeaf != null) {
    notRun.push({ id: 'checkpoint', what: `your saved checkpoint (${trust.savedCheckpoint.size} leaves) predates this trail's head (leaf ${trust.headLeaf}), so it does not hold this trail`, todo: 'save the checkpoint this verification checked (below) and verify the trail again with it later: that shows the trail was not changed since. A checkpoint fixes only the leaves it counts: a server holding its key could have rewritten a trail logged after it and rebuilt the log from there' });
  } else if (gaps.has('checkpoint')) {
    notRun.push({ id: 'checkpoint', what: 'that the log still extends a checkpoint you saved earlier was not checked', todo: 'paste a log checkpoint you saved before (each verification shows the one it checked, to save for the next): without one, a server holding its key could have rebuilt its log around a rewritten trail' });
  }

  if (gaps.has('later-heads')) {
    notRun.push(heads?.wentOn
      ? { id: 'later-heads', what: `this is not the thread's latest head: it went on after this trail (leaf ${heads.wentOn.leaf} of the log logs its record ${heads.wentOn.seq})`, todo: 'audit its latest bundle for the rest of the thread, if the server still has it (this trail\'s records are genuine)' }
      : { id: 'later-heads', what: 'that this is the thread\'s latest head was not checked (the log\'s leaves were not read)', todo: `${heads?.error ? `the log could not be read (${heads.error}), so ` : ''}give the audited server's address (its public log is read from there), or run proofgate audit --log with that server's URL` });
  }

  if (gaps.has('unfinished')) {
    notRun.push({ id: 'unfinished', what: 'that the thread ends here was not checked (it had not ended at this trail\'s last record)', todo: 'verify it again once it has ended: until then, a copy of the log from before it went on (old responses replayed to you, no signature needed) would show no later head' });
  }
  // A gap the core reports that this page has no words of its own for (a newer core's) is
  // still a gap, in the core's words: the page never shows a pass the CLI would not.
  const worded = new Set(['older-format', 'policy', 'thread', 'validator-premises', 'bundle', 'key', 'checkpoint', 'later-heads', 'unfinished']);
  for (const g of coreGaps) {
    if (!worded.has(g.id)) notRun.push({ id: g.id, what: g.what, todo: 'see "Audit trails" in proofgate\'s README for what this check needs' });
  }

  function showSummary(z3State) {
    const failures = rows.map((r, i) => ({ r, i })).filter((x) => x.r.state === 'fail');
    const first = failures[0];
    const ok = !first && chain.ok && replay.ok && !(trust && !trust.ok) && !trustError && !planError && !threadProblem && !heads?.problem;
    const outcome = !ok ? 'fail' : z3State === 'running' ? 'pending' : notRun.length ? 'incomplete' : 'pass';
    summary.className = `verdict-box ${outcome}`;
    summary.dataset.outcome = outcome;
    const heading = {
      fail: first ? `✗ Record ${first.i} fails` : threadProblem ? `✗ Not the thread you are auditing: ${threadProblem}`
        : heads?.problem ? (heads.logFault ? `✗ ${heads.problem[0].toUpperCase()}${heads.problem.slice(1)}` : `✗ The log contradicts this trail: ${heads.problem}`)
          : '✗ The trail is not the server\'s signed, logged trail',
      pending: '… Checking the logic with Z3',
      incomplete: `⚠ Not fully verified: ${notRun.map((m) => m.what).join('; ')}`,
      pass: replay.status === 'VALID' ? '✓ Every record passes'
        : `✓ Every record passes: the thread ${replay.status ? `ended ${replay.status} (${OUTCOMES[replay.status] || 'not VALID'})` : 'has not ended (no final outcome yet)'}`,
    }[outcome];
    // Native append() writes a null child as the text "null": pass only the parts shown.
    clear(summary).append(...[
      h('h3', {}, heading),
      outcome === 'incomplete' || (outcome === 'pending' && notRun.length)
        ? h('div', { class: 'not-run' },
          h('p', {}, h('strong', {}, 'Nothing failed, but this is not a full audit. To complete it:')),
          h('ul', {}, notRun.map((m) => h('li', { 'data-missing': m.id }, `${m.what[0].toUpperCase()}${m.what.slice(1)}: ${m.todo}.`))))
        : null,
      h('ul', {},
        h('li', { 'data-check': 'thread', class: threadProblem ? 'fail' : expectedThread ? 'pass' : '' },
          threadProblem ? `✗ Thread: ${threadProblem}` : expectedThread ? `✓ Thread: ${shownThread}, the one you are auditing` : `Thread: ${shownThread} (not checked against the one you are auditing)`),
        // What was verified, from the replayed records themselves: the chat and the thread
        // view show the server's copy, which nothing ties to this trail.
        replay.ok && typeof replay.question === 'string'
          ? h('li', { 'data-check': 'question' }, 'Question, as the trail holds it: ', h('q', { dir: 'ltr' }, visible(replay.question))) : null,
        replay.ok
          ? h('li', { 'data-check': 'answer' }, typeof replay.answer === 'string'
            ? [`Answer released, as the trail holds it (compare it with the one you were shown${replay.status === 'VALID' ? '' : ', which proofgate\'s notice came before'}): `,
              h('blockquote', { dir: 'ltr' }, visible(replay.answer))]
            : 'Answer released: none in this trail') : null,
        h('li', { 'data-check': 'format' }, replay.formatVersion
          ? `Audit format ${replay.formatVersion}${replay.formatVersion < current ? ` (older than the current format ${current}: replayed under its weaker rules)` : replay.formatVersion === current ? ' (the current format)' : ` (newer than this verifier's format ${current}: use a newer verifier)`}`
          : 'Audit format: not readable'),
        h('li', {}, chain.ok ? `Hash chain intact: ${chain.verifiedRecords}/${chain.records} records` : `Hash chain broken at record ${chain.failure?.index}`),
        h('li', {}, replay.ok ? `Replay: every decision of the loop reproduced (outcome ${replay.status || 'none'}), head ${(replay.headHash || '').slice(0, 16)}…` : `Replay stops at record ${replay.failure?.index} (${replay.failure?.problem})`),
        h('li', { 'data-check': 'logic' }, !policy ? 'Logic not re-checked: load your copy of the policy to rebuild and run every finding\'s solver checks.'
          : planError ? `Logic not re-checked: ${planError}`
            : totalChecks === 0 ? `No finding in this trail needs a solver check (policy ${plan?.policyContentHash?.slice(0, 20)}…).`
              : z3Why ? `Logic not re-checked: ${z3Why}`
                : z3State === 'running' ? `Running ${totalChecks} solver checks rebuilt from ${ourPolicy} with Z3…`
                  : `Logic: ${rows.filter((r) => r.z3ok).length} of ${withChecks.length} validations confirmed by Z3 from ${ourPolicy} (${totalChecks} checks; scripts stored in the trail are not run)`),
        trustLines()),
      // The checkpoint this bundle was checked against, once its signature held: the one to
      // save for the next audit.
      trust?.ok && bundleCheckpoint
        ? h('details', { class: 'save-checkpoint' },
          h('summary', {}, `The log checkpoint checked (size ${trust.checkpoint?.size ?? '?'}): save it, and paste it next time`),
          h('textarea', { id: 'checked-checkpoint', rows: '4', readonly: 'readonly', spellcheck: 'false' }, bundleCheckpoint))
        : null].filter(Boolean));
    clear(failureBox);
    if (first) {
      failureBox.append(h('div', { class: 'first-failure', role: 'alert' },
        h('strong', {}, `First failing record: #${first.i} (${typeof records[first.i]?.kind === 'string' ? visible(records[first.i].kind) : '?'})`),
        h('p', {}, first.r.why.textContent),
        h('button', { type: 'button', onclick: () => { first.r.tr.scrollIntoView({ block: 'center' }); first.r.tr.focus(); }, 'data-action': 'goto-failure' }, 'Go to the record')));
    }
    for (const r of rows) r.tr.classList.toggle('fail', r.state === 'fail');
    for (const r of rows) r.tr.classList.toggle('first', r === first?.r);
  }
  showSummary(totalChecks && !z3Why ? 'running' : 'done');

  if (totalChecks && !z3Why) {
    for (const wc of withChecks) {
      const row = rows[wc.i];
      let agree = 0;
      const problems = [];
      // A coverage group (anyOf) passes when any of its checks does: the pair is equivalent
      // to one of the pairs findings check, whichever.
      const results = [];
      for (const c of wc.checks) {
        try {
          const got = await runScript(c.script);
          if (run !== generation) return; // superseded: this run's page is gone
          results.push({ c, got, ok: answerMatches(got, c.expected) });
        } catch (e) {
          if (run !== generation) return;
          results.push({ c, error: visible(e.message), ok: false });
        }
      }
      // Judged by the core, as `proofgate audit` judges them.
      const passed = checksPassed(results.map((x) => x.c), Uint8Array.from(results.map((x) => (x.ok ? 1 : 0))));
      const groupsReported = new Set();
      for (const [i, { c, got, error }] of results.entries()) {
        if (passed[i]) { agree++; continue; }
        if (c.anyOf != null) {
          if (groupsReported.has(c.anyOf)) continue;
          groupsReported.add(c.anyOf);
        }
        if (error) problems.push(`finding ${c.finding + 1}: ${error}`);
        else if (c.kind === 'PAIR_COVERED') problems.push(`${visible(c.meaning)} — Z3 says ${got.trim()}, the check requires ${c.expected}`);
        else problems.push(`finding ${c.finding + 1} (${c.kind}): "${visible(c.meaning)}" — Z3 says ${got.trim()}, the finding requires ${c.expected}`);
      }
      row.z3ok = problems.length === 0;
      clear(row.logicCell).appendChild(row.z3ok ? mark('pass', `Z3 agrees (${agree}/${wc.checks.length})`) : mark('fail', `Z3 differs (${problems.length}/${wc.checks.length})`));
      if (!row.z3ok) {
        const text = `${PROBLEMS.Z3_DIFFERS}: ${problems.join('; ')}`;
        row.why.textContent = row.why.textContent ? `${row.why.textContent}. ${text}` : text;
        row.state = 'fail';
      }
    }
    showSummary('done');
  }
  if (run !== generation) return;
  announce(summary.querySelector('h3')?.textContent || 'Verified');
}

/** The auditor's inputs: policy, verifier key, saved checkpoint. When the page is served by
 * proofgate, the server's own policy and key are offered as defaults and labelled as such. */
async function auditorInputs() {
  const policyFile = h('input', { type: 'file', id: 'policy-file', accept: '.json,application/json' });
  const policyNote = h('p', { class: 'muted small', id: 'policy-source' });
  const key = h('input', { type: 'text', id: 'audit-key', spellcheck: 'false', placeholder: 'name+1a2b3c4d+AeXa…', value: auditor.key });
  const checkpoint = h('textarea', { id: 'saved-checkpoint', rows: '3', spellcheck: 'false', placeholder: 'proofgate.local/audit-log\n42\nroot…\n\n— proofgate …' }, auditor.checkpoint);
  const showPolicy = () => {
    policyNote.textContent = auditor.policy ? `Policy: ${auditor.policySource}` : 'No policy loaded: the logic is not re-checked.';
  };
  policyFile.addEventListener('change', async () => {
    const f = policyFile.files?.[0];
    if (!f) return;
    auditor.policy = await f.text();
    auditor.policySource = `${f.name} (your copy)`;
    auditor.policyServed = false;
    showPolicy();
    if (view.text) await verify(view.text, view.source, document.getElementById('verify-out'), view.urlThread);
  });
  const thread = h('input', { type: 'text', id: 'expected-thread', spellcheck: 'false', placeholder: 'the thread id (a loaded /api/threads/<id>/audit/bundle URL names it)', value: auditor.thread });
  thread.addEventListener('input', () => { auditor.thread = thread.value.trim(); markStale(); });
  const keyNote = h('p', { class: 'muted small', id: 'audit-key-source' });
  const showKey = () => {
    keyNote.textContent = auditor.key && auditor.keyServed
      ? 'Served by this server, so it is the server\'s word: clear the field and paste the key you hold (obtained out of band) for a full audit.' : '';
  };
  // The served key stays the server's until the auditor clears the field: a character typed
  // and taken back, or the same text pasted over it, leaves the server's key in place (a
  // review: any edit made it count as the auditor's). Once cleared, what is pasted is theirs.
  key.addEventListener('input', () => {
    auditor.key = key.value.trim();
    if (!auditor.key) auditor.keyCleared = true;
    auditor.keyServed = !auditor.keyCleared && auditor.key === auditor.servedKey;
    showKey();
    markStale();
  });
  checkpoint.addEventListener('input', () => { auditor.checkpoint = checkpoint.value; markStale(); });
  const logServer = h('input', { type: 'url', id: 'log-server', spellcheck: 'false', placeholder: 'https://proofgate.example.com (empty: this page\'s server)', value: auditor.logServer });
  logServer.addEventListener('input', () => { auditor.logServer = logServer.value.trim(); markStale(); });
  if (api.serverAvailable()) {
    try {
      if (!auditor.key) {
        const res = await fetch('/.well-known/proofgate/audit-key');
        if (res.ok) { auditor.key = (await res.text()).trim(); auditor.servedKey = auditor.key; auditor.keyServed = true; auditor.keyCleared = false; key.value = auditor.key; }
      }
      if (!auditor.policy) {
        const list = await api.policies();
        const p = (list?.policies || list || [])[0];
        if (p?.definition) {
          auditor.policy = JSON.stringify(p.definition);
          auditor.policyServed = true;
          auditor.policySource = `served by this server (${p.contentHash?.slice(0, 20)}…), so it is the server's word: for a full audit load the policy file you hold`;
        }
      }
    } catch { /* offline or no read scope: the auditor loads them */ }
  }
  showPolicy();
  showKey();
  return h('fieldset', { class: 'auditor' },
    h('legend', {}, 'What you bring'),
    h('div', { class: 'source' }, h('label', { for: 'policy-file' }, 'Your copy of the policy (JSON)'), policyFile, policyNote),
    h('div', { class: 'source' }, h('label', { for: 'audit-key' }, 'The server\'s verifier key'), key, keyNote),
    h('div', { class: 'source' }, h('label', { for: 'expected-thread' }, 'The thread you are auditing'), thread),
    h('div', { class: 'source wide' }, h('label', { for: 'saved-checkpoint' }, 'A log checkpoint you saved earlier (for a full audit)'), checkpoint),
    h('div', { class: 'source wide' }, h('label', { for: 'log-server' }, 'The audited server\'s address, where its public log is read'), logServer));
}

/** Leaving the verifier: a run still awaiting Z3 must not announce into the next page. */
export function leaveVerifier() {
  generation++;
  loads++;
}

// Each load's number (a URL, a file, a paste): a slower earlier load must not verify, and show
// its result, after a later one (a review found thread A's pass replacing B's failure while the
// URL field named B).
let loads = 0;

/** Starts a load: any run or load before it is superseded, and its result taken down. */
function startLoad() {
  generation++;
  const out = document.getElementById('verify-out');
  if (out) clear(out);
  return ++loads;
}

/** What the auditor brings changed: the result on screen was reached without it. */
function markStale() {
  const out = document.getElementById('verify-out');
  // Drawn already, or still being reached (a run awaiting the log draws nothing until then).
  if (!out || (!out.firstChild && !running) || out.querySelector('[data-stale]')) return;
  generation++; // a run still going used the old inputs
  clear(out).appendChild(h('p', { class: 'warning', 'data-stale': 'true', role: 'status' },
    'What you bring changed since this trail was verified: load or verify it again for a result that uses it.'));
}

export async function renderVerifier(main, r) {
  const visit = ++generation; // a run still awaiting Z3 belongs to the page being replaced
  const out = h('div', { class: 'verify-out', id: 'verify-out' });
  const file = h('input', { type: 'file', id: 'trail-file', accept: '.json,application/json' });
  const paste = h('textarea', { id: 'trail-text', rows: '6', spellcheck: 'false', placeholder: '[{"seq": 0, "prev": "000…", "kind": "THREAD_STARTED", …}, …]' });
  // Each visit names its own thread (or none): a thread typed for an earlier audit must not
  // judge this one.
  auditor.thread = r.query.get('thread') || '';
  const url = h('input', { type: 'text', id: 'trail-url', placeholder: '/api/threads/<id>/audit/bundle', value: r.query.get('url') || '' });
  const inputs = await auditorInputs();
  if (visit !== generation) return; // left while the server's key and policy were read
  const err = h('p', { class: 'error', role: 'alert' });
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (!f) return;
    err.textContent = '';
    const mine = startLoad();
    const text = await f.text();
    if (mine === loads) await verify(text, f.name, out);
  });
  async function fromUrl(ev) {
    ev?.preventDefault();
    err.textContent = '';
    const u = url.value.trim();
    if (!u) { err.textContent = 'Give a URL first.'; url.focus(); return; }
    const mine = startLoad();
    try {
      // With a saved checkpoint, ask for the consistency proof from its size.
      const savedSize = Number((auditor.checkpoint || '').split('\n')[1]);
      const withProof = savedSize > 0 && !/[?&]from=/.test(u) ? `${u}${u.includes('?') ? '&' : '?'}from=${savedSize}` : u;
      // This server's trails need the tab's key; it is never sent to another origin.
      const res = await api.fetchWithKey(withProof);
      if (mine !== loads) return;
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const text = await res.text();
      if (mine !== loads) return;
      await verify(text, u, out, threadOfUrl(u));
    } catch (e) {
      if (mine !== loads) return;
      clear(out); // no earlier result stays under a failed load
      err.textContent = `Could not load ${visible(u)}: ${visible(e.message)}`;
    }
  }
  const z3note = z3Unavailable();
  clear(main).appendChild(h('div', { class: 'page verify' },
    h('h2', { tabindex: '-1', id: 'verify-title' }, 'Audit verifier'),
    h('p', {}, 'Checks a thread\'s audit trail in this page, without trusting the server: the SHA-256 hash chain, a replay of every decision of the rewriting loop with the proofgate core (WebAssembly), every finding\'s solver checks rebuilt from your policy and run with Z3 (scripts stored in the trail are never run), and the server\'s signature and the append-only log.'),
    z3note ? h('p', { class: 'warning', 'data-z3': 'unavailable' }, z3note, ' The chain and replay checks still run.') : null,
    inputs,
    h('div', { class: 'sources' },
      h('div', { class: 'source' }, h('label', { for: 'trail-file' }, 'Open a file'), file),
      h('form', { class: 'source', onsubmit: fromUrl },
        h('label', { for: 'trail-url' }, 'Load from a URL (a thread\'s /audit/bundle)'), url,
        h('button', { type: 'submit', 'data-action': 'load-url' }, 'Load and verify')),
      h('form', {
        class: 'source wide',
        onsubmit: async (ev) => { ev.preventDefault(); err.textContent = ''; if (!paste.value.trim()) { err.textContent = 'Paste a trail first.'; paste.focus(); return; } startLoad(); await verify(paste.value, 'pasted text', out); },
      },
      h('label', { for: 'trail-text' }, 'Or paste a trail (JSON)'), paste,
      h('button', { type: 'submit', class: 'primary', 'data-action': 'verify-paste' }, 'Verify pasted trail'))),
    err, out));
  main.querySelector('#verify-title').focus();
  if (r.query.get('url')) await fromUrl();
}
