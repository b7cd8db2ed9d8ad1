// The proxy's JSON API (same origin). Errors come back as {"error": {"code", "message"}}.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: body ? { 'content-type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    throw new ApiError(0, 'unreachable', `cannot reach the proofgate server (${e.message})`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    const err = data && data.error;
    throw new ApiError(res.status, err?.code || `http_${res.status}`, err?.message || `${method} ${path}: HTTP ${res.status}`);
  }
  if (data === null) throw new ApiError(res.status, 'not_json', `${method} ${path}: the reply is not JSON`);
  return data;
}

/** Whether a server is behind this page (false when opened from disk or a plain static host). */
export const serverAvailable = () => location.protocol !== 'file:';

export const listThreads = () => call('GET', '/api/threads');
export const getThread = (id) => call('GET', `/api/threads/${encodeURIComponent(id)}`);
// wait: false — the server replies at once and runs the loop in the background, saving every
// step, so the page shows live progress by polling the thread.
export const createThread = (question, answer, settings) =>
  call('POST', '/api/threads', { question, ...(answer ? { answer } : {}), ...(settings ? { settings } : {}), wait: false });
export const answerThread = (id, answers) => call('POST', `/api/threads/${encodeURIComponent(id)}/answers`, { answers, wait: false });
export const skipThread = (id) => call('POST', `/api/threads/${encodeURIComponent(id)}/answers`, { skip: true, wait: false });
export const serverConfig = () => call('GET', '/api/config');
export const auditUrl = (id) => `/api/threads/${encodeURIComponent(id)}/audit`;
export const healthz = () => call('GET', '/healthz');
export const lintPolicy = (policy) => call('POST', '/api/policies/lint', { policy });

let policiesPromise = null;
/** GET /api/policies, once per page (the configured policy does not change while serving). */
export function policies() {
  if (!policiesPromise) policiesPromise = call('GET', '/api/policies').catch((e) => { policiesPromise = null; throw e; });
  return policiesPromise;
}

/** Rule id -> {id, expression, english, alternateExpression}, from the served policies, else {}. */
export async function ruleIndex() {
  try {
    const { policies: list } = await policies();
    const idx = {};
    for (const p of list) for (const r of p.rules || []) idx[r.id] = { ...r, policyVersionArn: p.versionArn };
    return idx;
  } catch {
    return {};
  }
}
