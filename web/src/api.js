// The proxy's JSON API (same origin). Errors come back as {"error": {"code", "message"}}.
// The API key is kept in this tab's session storage (gone when the tab closes) and sent as
// `Authorization: Bearer`, to this origin only.

const KEY_ITEM = 'proofgate.apiKey';

/** The API key of this tab, or ''. */
export function apiKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM) || '';
  } catch {
    return '';
  }
}

/** Keeps `key` for this tab ('' forgets it). */
export function setApiKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_ITEM, key);
    else sessionStorage.removeItem(KEY_ITEM);
  } catch {
    /* storage disabled: the key lasts until the page is reloaded */
  }
  policiesPromise = null;
}

function authHeaders() {
  const key = apiKey();
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** fetch() that sends the key only when `url` is on this server's origin. */
export function fetchWithKey(url) {
  const u = new URL(url, location.href);
  return fetch(u, u.origin === location.origin ? { headers: authHeaders() } : {});
}

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
      headers: { ...authHeaders(), ...(body ? { 'content-type': 'application/json' } : {}) },
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
    // The key is missing, wrong, revoked or expired: the page asks for one.
    if (res.status === 401) window.dispatchEvent(new CustomEvent('proofgate:unauthorized', { detail: err?.message }));
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
export const auditUrl = (id) => `/api/threads/${encodeURIComponent(id)}/audit/bundle`;
/** Who this key is and what its scopes allow: {authRequired, id, name, scopes, allows}. */
export const me = () => call('GET', '/api/me');
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
