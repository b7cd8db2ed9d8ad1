// The audit verifier: loads a trail (file, paste or URL) and, in the page, checks its hash
// chain and replays every decision with the proofgate core (wasm), then re-runs every
// finding's recorded SMT-LIB with Z3. Works from static files; without cross-origin isolation
// Z3 is reported unavailable and the chain and replay checks still run.
import { h, clear, fmtTime, pre, announce } from './util.js';
import * as api from './api.js';
import { wasm, verifyChain, replayAudit } from './core.js';
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
  Z3_DIFFERS: 'Z3 in this page gives a different answer than the recorded one',
  Z3_ERROR: 'Z3 could not run the recorded script',
};

const view = { source: null, text: null, result: null };

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

async function verify(text, source, out) {
  await wasm();
  view.text = text;
  view.source = source;
  clear(out);
  let records;
  try {
    records = recordsOf(JSON.parse(text));
  } catch (e) {
    out.appendChild(h('div', { class: 'verdict-box fail', role: 'alert', 'data-outcome': 'fail' },
      h('h3', {}, '✗ Not a readable audit trail'), h('p', {}, e.message)));
    return;
  }
  const chain = verifyChain(records);
  const replay = replayAudit(records);
  const firstStructural = [chain.failure, replay.failure].filter(Boolean).sort((a, b) => a.index - b.index)[0] || null;
  const structIdx = firstStructural ? firstStructural.index : Infinity;

  const withChecks = records.map((r, i) => ({ i, checks: (r?.body?.evidence?.checks || []).flatMap((c) => (c.checks || []).map((x) => ({ ...x, finding: c.finding, kind: c.kind }))) }))
    .filter((x) => x.checks.length > 0);
  const totalChecks = withChecks.reduce((n, x) => n + x.checks.length, 0);
  const z3Why = totalChecks ? z3Unavailable() : null;

  const summary = h('div', { class: 'verdict-box pending', role: 'status', 'aria-live': 'polite' });
  const failureBox = h('div', { class: 'failure-box' });
  const rows = records.map((r, i) => {
    const chainCell = h('td', {});
    const logicCell = h('td', {});
    const why = h('div', { class: 'why' });
    let body = null;
    const det = h('details', {}, h('summary', {}, 'Record'));
    det.addEventListener('toggle', () => { if (det.open && !body) { body = pre(JSON.stringify(r, null, 2)); det.appendChild(body); } });
    if (i < structIdx) chainCell.appendChild(mark('pass', 'hash, link, replay'));
    else if (i === structIdx) {
      chainCell.appendChild(mark('fail', firstStructural.problem));
      why.textContent = `${PROBLEMS[firstStructural.problem] || firstStructural.problem}: ${firstStructural.detail}`;
    } else chainCell.appendChild(mark('skip', 'after the first failure'));
    const wc = withChecks.find((x) => x.i === i);
    if (!wc) logicCell.appendChild(h('span', { class: 'muted' }, '—'));
    else if (z3Why) logicCell.appendChild(mark('skip', `Z3 unavailable (${wc.checks.length} checks)`));
    else logicCell.appendChild(mark('pending', `${wc.checks.length} checks`));
    const tr = h('tr', { id: `rec-${i}`, tabindex: '-1', dataset: { index: String(i), kind: r?.kind || '' } },
      h('td', {}, String(r?.seq ?? i)),
      h('td', {}, h('code', {}, r?.kind || '?'), h('div', { class: 'muted small' }, fmtTime(r?.at))),
      h('td', {}, h('code', { class: 'hash', title: r?.hash || '' }, (r?.hash || '').slice(0, 8))),
      chainCell, logicCell, h('td', {}, why, det));
    return { tr, chainCell, logicCell, why, state: i < structIdx ? 'pass' : i === structIdx ? 'fail' : 'skip' };
  });

  out.append(
    summary,
    failureBox,
    h('div', { class: 'table-wrap' }, h('table', { class: 'records' },
      h('caption', {}, `${records.length} records${source ? ` from ${source}` : ''}`),
      h('thead', {}, h('tr', {}, ['#', 'Kind', 'Hash', 'Chain and replay', 'Logic (Z3)', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((r) => r.tr)))));

  function showSummary(z3State) {
    const failures = rows.map((r, i) => ({ r, i })).filter((x) => x.r.state === 'fail');
    const first = failures[0];
    const ok = !first && chain.ok && replay.ok;
    summary.className = `verdict-box ${ok ? 'pass' : first ? 'fail' : 'pending'}`;
    summary.dataset.outcome = ok && z3State !== 'running' ? 'pass' : first ? 'fail' : 'pending';
    clear(summary).append(
      h('h3', {}, ok ? (z3State === 'running' ? '… Checking the logic with Z3' : '✓ Every record passes') : first ? `✗ Record ${first.i} fails` : '…'),
      h('ul', {},
        h('li', {}, chain.ok ? `Hash chain intact: ${chain.verifiedRecords}/${chain.records} records` : `Hash chain broken at record ${chain.failure?.index}`),
        h('li', {}, replay.ok ? `Replay: every decision of the loop reproduced (outcome ${replay.status || 'none'}), head ${(replay.headHash || '').slice(0, 16)}…` : `Replay stops at record ${replay.failure?.index} (${replay.failure?.problem})`),
        h('li', {}, totalChecks === 0 ? 'No recorded solver checks in this trail (e.g. findings from Amazon Bedrock).'
          : z3Why ? `Logic not re-checked: ${z3Why}`
            : z3State === 'running' ? `Re-running ${totalChecks} recorded solver checks with Z3…`
              : `Logic: ${rows.filter((r) => r.z3ok).length} of ${withChecks.length} records with solver checks confirmed by Z3 (${totalChecks} checks)`)));
    clear(failureBox);
    if (first) {
      failureBox.append(h('div', { class: 'first-failure', role: 'alert' },
        h('strong', {}, `First failing record: #${first.i} (${records[first.i]?.kind || '?'})`),
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
      for (const c of wc.checks) {
        try {
          const got = await runScript(c.script);
          if (got === c.expected) agree++;
          else problems.push(`finding ${c.finding + 1} (${c.kind}): "${c.meaning}" — Z3 says ${got}, the record says ${c.expected}`);
        } catch (e) {
          problems.push(`finding ${c.finding + 1}: ${e.message}`);
        }
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
  announce(summary.querySelector('h3')?.textContent || 'Verified');
}

export async function renderVerifier(main, r) {
  const out = h('div', { class: 'verify-out', id: 'verify-out' });
  const file = h('input', { type: 'file', id: 'trail-file', accept: '.json,application/json' });
  const paste = h('textarea', { id: 'trail-text', rows: '6', spellcheck: 'false', placeholder: '[{"seq": 0, "prev": "000…", "kind": "THREAD_STARTED", …}, …]' });
  const url = h('input', { type: 'text', id: 'trail-url', placeholder: '/api/threads/<id>/audit', value: r.query.get('url') || '' });
  const err = h('p', { class: 'error', role: 'alert' });
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (!f) return;
    err.textContent = '';
    await verify(await f.text(), f.name, out);
  });
  async function fromUrl(ev) {
    ev?.preventDefault();
    err.textContent = '';
    const u = url.value.trim();
    if (!u) { err.textContent = 'Give a URL first.'; url.focus(); return; }
    try {
      // This server's trails need the tab's key; it is never sent to another origin.
      const res = await api.fetchWithKey(u);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      await verify(await res.text(), u, out);
    } catch (e) {
      err.textContent = `Could not load ${u}: ${e.message}`;
    }
  }
  const z3note = z3Unavailable();
  clear(main).appendChild(h('div', { class: 'page verify' },
    h('h2', { tabindex: '-1', id: 'verify-title' }, 'Audit verifier'),
    h('p', {}, 'Checks a thread\'s audit trail in this page, without trusting the server: the SHA-256 hash chain, a replay of every decision of the rewriting loop with the proofgate core (WebAssembly), and every finding\'s recorded logic re-run with Z3.'),
    z3note ? h('p', { class: 'warning', 'data-z3': 'unavailable' }, z3note, ' The chain and replay checks still run.') : null,
    h('div', { class: 'sources' },
      h('div', { class: 'source' }, h('label', { for: 'trail-file' }, 'Open a file'), file),
      h('form', { class: 'source', onsubmit: fromUrl },
        h('label', { for: 'trail-url' }, 'Load from a URL (a thread\'s /audit)'), url,
        h('button', { type: 'submit', 'data-action': 'load-url' }, 'Load and verify')),
      h('form', {
        class: 'source wide',
        onsubmit: async (ev) => { ev.preventDefault(); err.textContent = ''; if (!paste.value.trim()) { err.textContent = 'Paste a trail first.'; paste.focus(); return; } await verify(paste.value, 'pasted text', out); },
      },
      h('label', { for: 'trail-text' }, 'Or paste a trail (JSON)'), paste,
      h('button', { type: 'submit', class: 'primary', 'data-action': 'verify-paste' }, 'Verify pasted trail'))),
    err, out));
  main.querySelector('#verify-title').focus();
  if (r.query.get('url')) await fromUrl();
}
