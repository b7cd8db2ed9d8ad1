// A dedicated worker that runs Z3 (npm z3-solver), so the page's main thread never blocks on
// the solver's threads. Messages: {id, script} in, {id, out} or {id, error} out, in order.
import { init } from 'z3-solver/build/browser.js';

const builtJs = new URL('z3-built.js', self.location.href).href;
importScripts(builtJs); // defines initZ3 (must be a classic script, not bundled)

let ready = null;
function load() {
  if (!ready) {
    ready = init({
      // Emscripten starts its solver threads from this script and finds the .wasm next to it.
      mainScriptUrlOrBlob: builtJs,
      locateFile: (file) => new URL(file, self.location.href).href,
    });
  }
  return ready;
}

async function run(script) {
  const { Z3, em } = await load();
  const cfg = Z3.mk_config();
  const ctx = Z3.mk_context_rc(cfg);
  Z3.del_config(cfg);
  // z3-solver's own eval_smtlib2_string passes the script on the C stack, which is reused
  // before its solver thread has read it (long scripts come back garbled). The script goes on
  // the heap instead and is freed once the solver is done. (The memory is fixed: no growth.)
  const bytes = new TextEncoder().encode(script);
  const ptr = em._malloc(bytes.length + 1);
  em.HEAPU8.set(bytes, ptr);
  em.HEAPU8[ptr + bytes.length] = 0;
  try {
    const out = await em.async_call(() => em.ccall('async_Z3_eval_smtlib2_string', 'void', ['number', 'number'], [ctx, ptr]));
    return String(out).trim();
  } finally {
    em._free(ptr);
    Z3.del_context(ctx);
  }
}

let queue = Promise.resolve();
self.onmessage = (ev) => {
  const { id, script } = ev.data;
  queue = queue.then(async () => {
    try {
      self.postMessage({ id, out: await run(script) });
    } catch (e) {
      self.postMessage({ id, error: String(e?.message || e) });
    }
  });
};
