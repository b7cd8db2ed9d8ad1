// The API key of this tab: asking for one when the server wants it, showing what its scopes
// allow, forgetting it. With `auth.required = false` the server needs none and the page says so.
import * as api from './api.js';
import { h, clear } from './util.js';

const SCOPES = {
  chat: 'ask questions and answer follow-up questions',
  read: 'see this key\'s own threads, their iterations and audit trails',
  admin: 'everything: every thread, keys, policy tools (lint), configuration, metrics',
};

let identity = null; // {authRequired, id, name, scopes, allows} once known

/** What the current key may do (null until known). */
export const currentIdentity = () => identity;

/** Whether `scope` is allowed (true while unknown: the server still decides). */
export const allows = (scope) => !identity || Boolean(identity.allows?.[scope]);

/** Asks the server who this tab's key is; returns the identity, or null when a key is needed. */
export async function loadIdentity() {
  if (identity) return identity;
  try {
    identity = await api.me();
  } catch (e) {
    identity = null;
    if (e.status !== 401) throw e;
  }
  renderKeyStatus();
  return identity;
}

function forget() {
  api.setApiKey('');
  identity = null;
  location.hash = '#/key';
  renderKeyStatus();
}

/** The header's key status: whose key, or that one is needed. */
export function renderKeyStatus() {
  const el = document.getElementById('key-status');
  if (!el) return;
  let content;
  if (identity && !identity.authRequired && !api.apiKey()) {
    content = h('span', { 'data-key': 'open' }, 'Open server (no key needed)');
  } else if (identity) {
    content = h('a', { href: '#/key', 'data-key': 'set' }, `Key: ${identity.name} (${identity.scopes.join(', ')})`);
  } else {
    content = h('a', { href: '#/key', 'data-key': 'missing' }, 'Enter an API key');
  }
  clear(el).appendChild(content);
}

/** What each scope allows, marking the key's own. */
function scopeList(me) {
  return h('ul', { class: 'scopes', 'data-testid': 'scopes' }, Object.entries(SCOPES).map(([scope, what]) => {
    const has = Boolean(me?.allows?.[scope]);
    return h('li', { 'data-scope': scope, 'data-allowed': String(has) },
      h('span', { class: `mark ${has ? 'pass' : 'fail'}`, 'aria-hidden': 'true' }, has ? '✓' : '✗'),
      ' ', h('strong', {}, scope), `: ${what}`, has ? '' : h('span', { class: 'visually-hidden' }, ' (not allowed)'));
  }));
}

/** The key page (`#/key`), also shown instead of a view that needs a key. */
export async function renderKeyPage(main, { reason, accepted } = {}) {
  const input = h('input', { id: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'pg_…' });
  const err = h('p', { class: 'error', role: 'alert' });
  const info = h('div', { class: 'key-info', 'aria-live': 'polite' });
  const showInfo = () => {
    clear(info);
    if (identity) {
      info.append(
        h('p', { 'data-testid': 'key-name' }, identity.authRequired || api.apiKey()
          ? ['This tab uses the key ', h('strong', {}, identity.name), ` (${identity.id}).`]
          : 'This server does not require keys (auth.required = false: local development). Everything is open.'),
        h('p', {}, 'What it allows:'), scopeList(identity));
    }
  };
  const form = h('form', { class: 'key-form' },
    h('label', { for: 'api-key' }, 'API key'), input,
    h('p', { class: 'muted small' }, 'Kept in this tab only (session storage) and sent to this server as Authorization: Bearer. An admin creates keys with ', h('code', {}, 'proofgate keys create'), ' or POST /api/keys.'),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', 'data-action': 'use-key' }, 'Use this key'),
      api.apiKey() ? h('button', { type: 'button', 'data-action': 'forget-key', onclick: forget }, 'Forget the key') : null),
    err);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) {
      err.textContent = 'Paste a key first.';
      input.focus();
      return;
    }
    err.textContent = '';
    api.setApiKey(key);
    identity = null;
    const me = await loadIdentity().catch((e) => {
      err.textContent = `Could not check the key: ${e.message}`;
      return null;
    });
    if (!me) {
      api.setApiKey('');
      renderKeyStatus();
      if (!err.textContent) err.textContent = 'That key is not valid (unknown, revoked or expired).';
      input.focus();
      return;
    }
    renderKeyStatus();
    // Shown again without the warning, with what the key allows and a way to forget it.
    await renderKeyPage(main, { accepted: true });
  });
  clear(main).appendChild(h('section', { class: 'center narrow key-page' },
    h('h2', { tabindex: '-1', id: 'key-title' }, 'API key'),
    reason ? h('p', { class: 'warning', 'data-testid': 'key-needed' }, reason) : null,
    form, info,
    h('p', {}, h('a', { href: '#/chat' }, 'Back to the chat'))));
  await loadIdentity().catch(() => null);
  showInfo();
  if (accepted) {
    const first = info.querySelector('p');
    first?.setAttribute('tabindex', '-1');
    first?.focus();
  } else (reason ? input : main.querySelector('#key-title')).focus();
}

// Any 401 (a key revoked or expired meanwhile): forget who we were.
window.addEventListener('proofgate:unauthorized', () => {
  identity = null;
  renderKeyStatus();
});
