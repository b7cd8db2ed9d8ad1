// The policy viewer: types, variables, rules in SMT-LIB and structured English, lint warnings.
import * as api from './api.js';
import { h, clear, pre } from './util.js';
import { allows } from './keys.js';

function lintView(p) {
  if (!allows('admin')) {
    return h('div', { class: 'lint' }, h('p', { class: 'muted', 'data-lint': 'needs-admin' },
      'Linting on the server needs a key with the admin scope; run `proofgate policy lint FILE` instead.'));
  }
  const box = h('div', { class: 'lint', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Linting…'));
  api.lintPolicy(p.definition).then((report) => {
    const issues = report.issues || [];
    clear(box).append(issues.length === 0
      ? h('p', { class: 'mark pass', 'data-lint': 'clean' }, '✓ No lint issues: no unused names, type errors, contradictions, always-true rules or disjoint rule groups.')
      : h('ul', { class: 'lint-issues' }, issues.map((i) => h('li', { class: `sev-${String(i.severity).toLowerCase()}` },
        h('strong', {}, `${i.severity} ${String(i.kind).replace(/_/g, ' ')}: `), i.message,
        i.rules?.length ? h('span', { class: 'muted' }, ` (rules ${i.rules.join(', ')})`) : null,
        i.names?.length ? h('span', { class: 'muted' }, ` (${i.names.join(', ')})`) : null))));
  }).catch((e) => {
    clear(box).append(h('p', { class: 'muted' }, e.status === 404 || e.status === 405
      ? 'This server does not offer linting (POST /api/policies/lint); run `proofgate policy lint FILE`.'
      : `Lint failed: ${e.message}`));
  });
  return box;
}

function policyView(p) {
  const d = p.definition || {};
  const types = d.types || [];
  const vars = d.variables || [];
  return h('article', { class: 'policy' },
    h('h3', {}, p.file || 'Policy'),
    h('p', {}, 'Version ', h('code', { class: 'arn' }, p.versionArn)),
    h('section', {}, h('h4', {}, 'Lint'), lintView(p)),
    h('section', {}, h('h4', {}, `Types (${types.length})`),
      types.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Type'), h('th', { scope: 'col' }, 'Values'), h('th', { scope: 'col' }, 'Description'))),
        h('tbody', {}, types.map((t) => h('tr', {}, h('td', {}, h('code', {}, t.name)),
          h('td', {}, (t.values || []).map((v) => h('div', {}, h('code', {}, v.value ?? v.name ?? String(v)), v.description ? h('span', { class: 'muted' }, ` — ${v.description}`) : null))),
          h('td', {}, t.description || ''))))) : h('p', { class: 'muted' }, 'No custom types.')),
    h('section', {}, h('h4', {}, `Variables (${vars.length})`),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Variable'), h('th', { scope: 'col' }, 'Type'), h('th', { scope: 'col' }, 'Description'))),
        h('tbody', {}, vars.map((v) => h('tr', {}, h('td', {}, h('code', {}, v.name)), h('td', {}, h('code', {}, v.type)), h('td', {}, v.description || '')))))),
    h('section', {}, h('h4', {}, `Rules (${(p.rules || []).length})`),
      h('table', { class: 'rules-table' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Rule'), h('th', { scope: 'col' }, 'Structured English'), h('th', { scope: 'col' }, 'SMT-LIB'))),
        h('tbody', {}, (p.rules || []).map((r) => h('tr', { id: `rule-${r.id}` }, h('td', {}, h('code', {}, r.id)),
          h('td', {}, r.english, r.alternateExpression && r.alternateExpression !== r.english ? h('div', { class: 'muted small' }, 'Author\'s text: ', r.alternateExpression) : null),
          h('td', {}, h('code', { class: 'smt' }, r.expression))))))),
    h('details', {}, h('summary', {}, 'The whole policy in SMT-LIB'), pre(p.smtlib, 'code smt')));
}

export async function renderPolicy(main) {
  const wrap = h('div', { class: 'page policy-page' }, h('h2', { tabindex: '-1', id: 'policy-title' }, 'Policy'));
  clear(main).appendChild(wrap);
  main.querySelector('#policy-title').focus();
  if (!api.serverAvailable()) {
    wrap.appendChild(h('p', {}, 'The policy viewer needs a running proofgate server.'));
    return;
  }
  try {
    const { policies } = await api.policies();
    if (!policies.length) wrap.appendChild(h('p', { class: 'muted' }, 'The server has no policy configured.'));
    for (const p of policies) wrap.appendChild(policyView(p));
  } catch (e) {
    wrap.appendChild(h('p', { class: 'error', role: 'alert' }, `Could not load the policies: ${e.message}`));
  }
}
