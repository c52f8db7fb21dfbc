// The console talks to the same /v1 API as any client, with the token the
// person signed in with, so the API's roles, owner bindings, policy and
// audit history apply to every action. The token lives in sessionStorage
// only (gone when the tab closes); it is sent in the Authorization header,
// never in a URL, and never written to the page or the console log.

const KEY = 'engram.console.token';

export const session = {
  token: () => sessionStorage.getItem(KEY),
  signIn: (t) => sessionStorage.setItem(KEY, t),
  signOut: () => sessionStorage.removeItem(KEY),
};

// APIError carries the RFC 9457 problem of a failed request.
export class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || ('HTTP ' + status));
    this.status = status;
    this.problem = problem || {};
  }
}

let onUnauthorized = () => {};

// whenUnauthorized sets what happens when the API refuses the token (401).
export function whenUnauthorized(fn) { onUnauthorized = fn; }

const timeoutMs = 30000;

// api sends one request and returns the decoded JSON (null for 204).
export async function api(method, path, body, token = session.token()) {
  if (!token) throw new APIError(401, { title: 'Not signed in', detail: 'sign in with an API token' });
  const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  const init = { method, headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer', signal: ctrl.signal };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, { title: 'Network error', detail: ctrl.signal.aborted ? 'no answer within 30 s' : String(e.message || e) });
  } finally {
    clearTimeout(timer);
  }
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    if (resp.status === 401 && token === session.token()) onUnauthorized();
    throw new APIError(resp.status, data);
  }
  return data;
}

// ownerPath is /v1/owners/{owner}/rest..., each segment escaped.
export function ownerPath(owner, ...rest) {
  return '/v1/owners/' + [owner, ...rest].map(encodeURIComponent).join('/');
}

// query builds "?a=b&..." from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}
