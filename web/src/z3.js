// Z3 in the page (npm z3-solver), in dedicated workers (z3-worker.js). z3-solver needs
// SharedArrayBuffer, so the page must be cross-origin isolated (proofgate serve sends
// COOP/COEP); elsewhere Z3 is reported unavailable. The audit verifier's own checks share one
// worker; scripts the server stored (the proof view) run in a worker of their own, closed after
// use, since a script can change Z3's process-wide parameters (`set-option`) for whatever runs
// after it in that worker.

export function z3Unavailable() {
  if (location.protocol === 'file:') return 'Z3 is unavailable for pages opened from disk (it needs a server that sends COOP/COEP).';
  if (typeof SharedArrayBuffer === 'undefined' || !globalThis.crossOriginIsolated) {
    return 'Z3 is unavailable here: the page is not cross-origin isolated (it needs the Cross-Origin-Opener-Policy and Cross-Origin-Embedder-Policy headers that proofgate serve sends), so SharedArrayBuffer is missing.';
  }
  return null;
}

// The first script also loads Z3 (a 35 MB wasm), hence the generous limit.
const TIMEOUT_MS = 120_000;

/** A Z3 worker, started on first use: run(script) and close(). */
function z3Worker() {
  let worker = null;
  let nextId = 1;
  const pending = new Map();

  function failAll(err) {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  }

  function getWorker() {
    if (!worker) {
      worker = new Worker('z3-worker.js');
      worker.onmessage = (ev) => {
        const p = pending.get(ev.data.id);
        if (!p) return;
        pending.delete(ev.data.id);
        if (ev.data.error !== undefined) p.reject(new Error(ev.data.error));
        else p.resolve(ev.data.out);
      };
      worker.onerror = (ev) => {
        ev.preventDefault?.();
        const w = worker;
        worker = null;
        w?.terminate();
        failAll(new Error(`Z3 failed to start: ${ev.message || 'worker error'}`));
      };
    }
    return worker;
  }

  function once(script) {
    return new Promise((resolve, reject) => {
      const id = nextId++;
      const w = getWorker();
      const timer = setTimeout(() => {
        // A stuck solver: drop the worker (and everything queued on it); the next call starts afresh.
        if (worker === w) worker = null;
        w.terminate();
        failAll(Object.assign(new Error(`Z3 gave no answer within ${TIMEOUT_MS / 1000} s`), { timeout: true }));
      }, TIMEOUT_MS);
      pending.set(id, {
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      w.postMessage({ id, script });
    });
  }

  return {
    /** Runs one complete SMT-LIB script in a fresh Z3 context: 'sat' | 'unsat' | 'unknown' | the output. */
    async run(script) {
      const why = z3Unavailable();
      if (why) throw new Error(why);
      try {
        return await once(script);
      } catch (e) {
        if (!e.timeout) throw e;
        return once(script); // once more, in a fresh worker
      }
    },
    close() {
      worker?.terminate();
      worker = null;
      failAll(new Error('Z3 was stopped'));
    },
  };
}

const verifierZ3 = z3Worker();

/** The audit verifier's checks (rebuilt by the core, never a stored script), in its own worker. */
export function runScript(script) {
  return verifierZ3.run(script);
}

/** A worker for scripts the server stored: call close() once done, so nothing they set outlives them. */
export function storedScriptZ3() {
  return z3Worker();
}
