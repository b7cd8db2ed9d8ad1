// The page: a hash router over four views (chat with debug panel and proof view, audit
// verifier, policy viewer). The `proofgate` wasm package is initialised once, up front.
import { wasm } from './core.js';
import { renderChat, leaveChat } from './chat.js';
import { renderVerifier, leaveVerifier } from './verify.js';
import { renderPolicy } from './policy.js';
import { loadIdentity, renderKeyPage } from './keys.js';
import { serverAvailable } from './api.js';
import { h, clear, announce } from './util.js';

/** '#/chat/ID/proof?x=1' -> {view: 'chat', parts: ['ID', 'proof'], query} */
function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const view = parts.shift() || (location.protocol === 'file:' ? 'verify' : 'chat');
  return { view, parts, query: new URLSearchParams(qs || '') };
}

let lastView = null;
// Each route's number: one still awaiting the server when another began paints nothing.
let routed = 0;

async function route() {
  const mine = ++routed;
  announce('');
  const main = document.getElementById('main');
  const r = parseRoute();
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === r.view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const sameView = lastView === r.view;
  if (r.view !== 'verify') leaveVerifier();
  if (r.view !== 'chat') leaveChat();
  lastView = r.view;
  try {
    if (r.view === 'verify') {
      await renderVerifier(main, r, { sameView });
      return;
    }
    if (r.view === 'key') {
      await renderKeyPage(main);
      return;
    }
    // The chat and the policy viewer talk to the server: without a key it would take, ask.
    if (serverAvailable()) {
      const me = await loadIdentity().catch(() => undefined);
      if (mine !== routed) return;
      if (me === null) {
        await renderKeyPage(main, { reason: 'This server needs an API key: enter one to continue.' });
        return;
      }
    }
    if (r.view === 'policy') await renderPolicy(main, r, { sameView });
    else await renderChat(main, r, { sameView });
  } catch (e) {
    console.error(e);
    clear(main).appendChild(h('p', { class: 'error', role: 'alert' }, `Something went wrong: ${e.message}`));
  }
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', async () => {
  // Here, not inline in the page: the Content-Security-Policy allows no inline script.
  document.querySelector('.skip-link')?.addEventListener('click', (e) => {
    e.preventDefault();
    document.getElementById('main').focus();
  });
  try {
    await wasm();
  } catch (e) {
    clear(document.getElementById('main')).appendChild(
      h('p', { class: 'error', role: 'alert' }, `The proofgate WebAssembly core could not start: ${e.message}`));
    return;
  }
  document.body.dataset.ready = 'true';
  route();
});
