// Z3 in the page (npm z3-solver): re-runs recorded SMT-LIB scripts and reports the solver's
// own answer. z3-solver needs SharedArrayBuffer, so the page must be cross-origin isolated
// (proofgate serve sends COOP/COEP); elsewhere Z3 is reported unavailable.
import { init } from 'z3-solver/build/browser.js';

let z3Promise = null;

export function z3Unavailable() {
  if (typeof SharedArrayBuffer === 'undefined' || !globalThis.crossOriginIsolated) {
    return 'Z3 is unavailable here: the page is not cross-origin isolated (it needs the Cross-Origin-Opener-Policy and Cross-Origin-Embedder-Policy headers that proofgate serve sends), so SharedArrayBuffer is missing.';
  }
  if (location.protocol === 'file:') return 'Z3 is unavailable for pages opened from disk.';
  return null;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(s);
  });
}

/** Loads Z3 once (z3-built.js as a classic script, then its 35 MB wasm). */
export function loadZ3() {
  const why = z3Unavailable();
  if (why) return Promise.reject(new Error(why));
  if (!z3Promise) {
    z3Promise = (async () => {
      if (!globalThis.initZ3) await loadScript('z3-built.js');
      const api = await init();
      const version = api.Z3.get_full_version ? api.Z3.get_full_version() : 'z3-solver';
      return { Z3: api.Z3, em: api.em, version };
    })();
    z3Promise.catch(() => { z3Promise = null; });
  }
  return z3Promise;
}

let queue = Promise.resolve();

/** Runs one complete SMT-LIB script in a fresh context; resolves to 'sat' | 'unsat' | 'unknown' | other output. */
export function runScript(script) {
  // One script at a time: z3-solver serializes async calls anyway, and results stay in order.
  const run = queue.then(async () => {
    const { Z3, em } = await loadZ3();
    const cfg = Z3.mk_config();
    const ctx = Z3.mk_context_rc(cfg);
    Z3.del_config(cfg);
    // z3-solver's own eval_smtlib2_string passes the script on the C stack, which is reused
    // before its solver thread has read it (long scripts come back garbled). The script goes
    // on the heap instead, freed once the solver is done. (Memory is fixed-size: no growth.)
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
  });
  queue = run.catch(() => {});
  return run;
}
