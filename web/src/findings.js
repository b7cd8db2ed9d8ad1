// Rendering of ApplyGuardrail-shaped findings: translations, rules, scenarios side by side,
// ambiguity options, logic warnings, and the recorded SMT-LIB checks (runnable in Z3).
import { h, kindBadge, findingKind, pre } from './util.js';
import { storedScriptZ3, z3Unavailable } from './z3.js';
import { policies } from './api.js';

/**
 * The whole SMT-LIB script of a recorded check. Trails record a check's own part only
 * (`afterPolicy`), once per policy version: it runs after that version's declarations and
 * rules, which the server's policy API serves (`smtlib`, by `contentHash`). Older trails
 * hold the whole script in every check.
 */
export async function fullScript(c) {
  if (!c.afterPolicy) return c.script;
  if (!c.policyContentHash) throw new Error('the check runs after the policy, but no policy version is recorded for it');
  const { policies: list } = await policies();
  const p = (list || []).find((x) => x.contentHash === c.policyContentHash);
  if (!p || typeof p.smtlib !== 'string') throw new Error(`this server does not serve policy ${c.policyContentHash}, which the check runs after`);
  return p.smtlib + c.script;
}

function statementsTable(caption, statements) {
  if (!statements || statements.length === 0) return null;
  return h('table', { class: 'stmts' },
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Natural language'), h('th', { scope: 'col' }, 'Logic (SMT-LIB)'))),
    h('tbody', {}, statements.map((s) => h('tr', {},
      h('td', {}, s.naturalLanguage || h('span', { class: 'muted' }, '(none)')),
      h('td', {}, h('code', {}, s.logic || ''))))));
}

function untranslated(caption, list) {
  if (!list || list.length === 0) return null;
  return h('div', { class: 'untranslated' }, h('strong', {}, caption), h('ul', {}, list.map((u) => h('li', {}, u.text || JSON.stringify(u)))));
}

export function translationView(t, title) {
  if (!t) return null;
  return h('div', { class: 'translation' },
    title ? h('h5', {}, title) : null,
    typeof t.confidence === 'number' ? h('p', { class: 'conf' }, 'Translation confidence: ', h('strong', {}, t.confidence.toFixed(2))) : null,
    statementsTable('Premises', t.premises),
    statementsTable('Claims', t.claims),
    untranslated('Untranslated premises', t.untranslatedPremises),
    untranslated('Untranslated claims', t.untranslatedClaims));
}

/** Rule references with their SMT-LIB and structured English from the policy. */
export function rulesView(caption, refs, rules) {
  if (!refs || refs.length === 0) return null;
  return h('div', { class: 'rules' }, h('h5', {}, caption),
    h('ul', { class: 'rule-list' }, refs.map((ref) => {
      const id = ref.identifier || ref.id || '?';
      const r = rules[id];
      return h('li', { class: 'rule' },
        h('code', { class: 'rule-id' }, id),
        r?.english ? h('p', { class: 'english' }, r.english) : h('p', { class: 'muted' }, 'Rule text not available (the policy is not served here).'),
        r?.expression ? h('pre', { class: 'code smt' }, r.expression) : null);
    })));
}

/** Scenario statements -> Map(variable -> value). */
export function scenarioValues(scenario) {
  const m = new Map();
  for (const s of scenario?.statements || []) {
    const logic = (s.logic || '').trim();
    const eq = /^\(=\s+([^\s()]+)\s+(.+)\)$/.exec(logic);
    if (eq) m.set(eq[1], { value: eq[2], nl: s.naturalLanguage });
    else {
      const neg = /^\(not\s+([^\s()]+)\)$/.exec(logic);
      if (neg) m.set(neg[1], { value: 'false', nl: s.naturalLanguage });
      else m.set(logic, { value: 'true', nl: s.naturalLanguage });
    }
  }
  return m;
}

/** Scenarios side by side; rows whose variable differs are highlighted (and marked ≠). */
export function scenariosSideBySide(caption, columns) {
  const cols = columns.filter((c) => c.scenario);
  if (cols.length === 0) return null;
  const maps = cols.map((c) => scenarioValues(c.scenario));
  const vars = [];
  for (const m of maps) for (const k of m.keys()) if (!vars.includes(k)) vars.push(k);
  let differing = 0;
  const rows = vars.map((v) => {
    const vals = maps.map((m) => m.get(v)?.value);
    const differs = cols.length > 1 && new Set(vals.map((x) => x ?? '—')).size > 1;
    if (differs) differing++;
    return h('tr', { class: differs ? 'diff' : null, dataset: { variable: v } },
      h('th', { scope: 'row' }, h('code', {}, v), differs ? h('span', { class: 'diff-mark', title: 'differs between the scenarios' }, ' ≠') : null),
      vals.map((x, i) => h('td', { title: maps[i].get(v)?.nl || '' }, x === undefined ? h('span', { class: 'muted' }, '—') : h('code', {}, x))));
  });
  return h('div', { class: 'scenarios' },
    h('table', { class: 'scenario-table' },
      h('caption', {}, caption, cols.length > 1 ? ` (${differing} differing variable${differing === 1 ? '' : 's'} highlighted)` : ''),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Variable'), cols.map((c) => h('th', { scope: 'col' }, c.title)))),
      h('tbody', {}, rows)));
}

function logicWarningView(w) {
  if (!w) return null;
  return h('div', { class: 'logic-warning', role: 'note' },
    h('strong', {}, `Logic warning: ${(w.type || 'WARNING').replace(/_/g, ' ')}`),
    h('p', {}, w.type === 'ALWAYS_TRUE' ? 'These statements hold whatever the facts are: they say nothing the policy could check.'
      : w.type === 'ALWAYS_FALSE' ? 'These statements can never hold under the policy.' : ''),
    statementsTable('Premises', w.premises), statementsTable('Claims', w.claims));
}

function ambiguityView(body) {
  const options = body.options || [];
  return h('div', { class: 'ambiguity' },
    h('h5', {}, `Interpretations (${options.length})`),
    h('div', { class: 'side' }, options.map((o, i) => h('div', { class: 'option' },
      h('h6', {}, `Interpretation ${i + 1}`),
      (o.translations || []).map((t, j) => translationView(t, (o.translations || []).length > 1 ? `Translation ${j + 1}` : null))))),
    scenariosSideBySide('Scenarios that separate the interpretations',
      (body.differenceScenarios || []).map((s, i) => ({ title: `Scenario ${i + 1}`, scenario: s }))));
}

/** The recorded SMT-LIB checks of one finding, each runnable in Z3 in the page. The scripts are
 * the server's text (`(echo "unsat")` prints the recorded answer): a match shows only that they
 * reproduce, never a verdict, and they run in a worker of their own, closed after use. */
export function checksView(checks, opts = {}) {
  if (!checks || checks.length === 0) return null;
  const rows = checks.map((c) => {
    const result = h('td', { class: 'z3-result', 'aria-live': 'polite' }, h('span', { class: 'muted' }, 'not run'));
    return { c, result, row: h('tr', {}, h('td', {}, c.meaning), h('td', {}, h('code', { class: 'expected' }, c.expected)), result) };
  });
  const status = h('p', { class: 'z3-status', role: 'status' });
  async function runAll(ev) {
    const btn = ev?.currentTarget;
    if (btn) btn.disabled = true;
    status.textContent = 'Loading Z3 in the page and running the recorded scripts…';
    let agree = 0;
    const z3 = storedScriptZ3();
    try {
      for (const { c, result } of rows) {
        result.textContent = 'running…';
        const out = await z3.run(await fullScript(c));
        const ok = out === c.expected;
        if (ok) agree++;
        result.replaceChildren(h('code', { class: 'z3-out' }, out), ' ',
          ok ? h('span', { class: 'muted' }, 'reproduced the recorded answer (the script is the server\'s)') : h('span', { class: 'mark fail' }, '✗ differs from the recorded answer'));
        result.dataset.outcome = ok ? 'reproduced' : 'mismatch';
      }
      status.textContent = agree === rows.length
        ? `Z3 in this page reproduced every recorded answer (${agree}/${rows.length}): the scripts are the server's, so this is no verdict; the audit verifier rebuilds its own checks.`
        : `Z3 in this page does not reproduce ${rows.length - agree} of ${rows.length} recorded answers.`;
      status.dataset.outcome = agree === rows.length ? 'reproduced' : 'refuted';
    } catch (e) {
      status.textContent = `Could not run Z3: ${e.message}`;
      status.dataset.outcome = 'error';
    } finally {
      z3.close();
      if (btn) btn.disabled = false;
    }
  }
  const unavailable = z3Unavailable();
  return h('div', { class: 'checks' },
    h('table', { class: 'check-table' },
      h('caption', {}, opts.caption || 'Recorded solver checks'),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'What the check shows'), h('th', { scope: 'col' }, 'Recorded answer'), h('th', { scope: 'col' }, 'Z3 in this page'))),
      h('tbody', {}, rows.map((r) => r.row))),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: opts.primary ? 'primary' : null, onclick: runAll, disabled: unavailable ? true : null, 'data-action': 'run-z3' },
        opts.buttonLabel || 'Check with Z3 in this page')),
    unavailable ? h('p', { class: 'muted' }, unavailable) : null,
    status,
    h('details', {}, h('summary', {}, `SMT-LIB scripts (${rows.length})`),
      checks.map((c, i) => h('div', {}, h('p', {}, `${i + 1}. ${c.meaning} — expected `, h('code', {}, c.expected),
        c.afterPolicy ? ` (after the declarations and rules of policy ${c.policyContentHash || '(not recorded)'}, shown in the policy viewer)` : null),
      pre(c.script, 'code smt')))));
}

/** One finding, in full. `evidenceChecks` are this finding's recorded checks, if any. */
export function findingView(f, index, rules, evidenceChecks) {
  const { kind, body } = findingKind(f);
  const t = body.translation;
  return h('article', { class: 'finding', dataset: { kind } },
    h('h4', {}, kindBadge(kind), ` Finding ${index + 1}`,
      typeof t?.confidence === 'number' ? h('span', { class: 'muted' }, ` · confidence ${t.confidence.toFixed(2)}`) : null),
    translationView(t),
    kind === 'VALID' ? rulesView('Supporting rules', body.supportingRules, rules) : null,
    kind === 'INVALID' || kind === 'IMPOSSIBLE' ? rulesView('Contradicting rules', body.contradictingRules, rules) : null,
    kind === 'SATISFIABLE'
      ? scenariosSideBySide('Scenarios', [
        { title: 'Claims true', scenario: body.claimsTrueScenario },
        { title: 'Claims false', scenario: body.claimsFalseScenario }])
      : kind === 'VALID' ? scenariosSideBySide('Scenario where the claims hold', [{ title: 'Value', scenario: body.claimsTrueScenario }]) : null,
    kind === 'TRANSLATION_AMBIGUOUS' ? ambiguityView(body) : null,
    kind === 'TOO_COMPLEX' ? h('p', {}, 'The input or the formula is over the limits, or the solver could not decide.') : null,
    kind === 'NO_TRANSLATIONS' ? h('p', {}, 'Nothing in the text could be put in the policy\'s vocabulary.') : null,
    logicWarningView(body.logicWarning),
    evidenceChecks ? h('details', { class: 'finding-checks' }, h('summary', {}, 'Solver checks for this finding'), checksView(evidenceChecks)) : null);
}

/** Checks recorded for finding `index` in a validation's evidence. */
export function checksFor(evidence, index) {
  const entry = (evidence?.checks || []).find((c) => c.finding === index);
  // Each check keeps the policy version it runs after (the validation's).
  return entry ? entry.checks.map((c) => ({ ...c, policyContentHash: evidence.policyContentHash })) : null;
}
