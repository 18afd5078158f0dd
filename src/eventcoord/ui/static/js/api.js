// The API client: the token lives in sessionStorage (or localStorage when the person asks
// to be remembered) and travels only in the Authorization header — never in a URL.

const KEY = 'eventcoord.token';

export class Unauthorized extends Error {}

/** No answer at all (server down, network gone): the stream's banner covers it. */
export class Offline extends Error {}

export class ApiError extends Error {
  constructor(status, body) {
    const err = body && body.error ? body.error : { code: `HTTP_${status}`, message: '' };
    super(`${err.code}: ${err.message}`);
    this.status = status;
    this.code = err.code;
    this.details = err.details;
  }
}

export const token = {
  get() {
    return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || '';
  },
  set(value, remember) {
    this.clear();
    (remember ? localStorage : sessionStorage).setItem(KEY, value);
  },
  clear() {
    sessionStorage.removeItem(KEY);
    localStorage.removeItem(KEY);
  },
};

/** `/v1/x` + query params (arrays repeat the key; null/undefined are left out). */
export function url(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** GET a JSON read with the bearer token; 401 → Unauthorized, other 4xx/5xx → ApiError. */
export async function get(path, params, { signal, bearer } = {}) {
  let r;
  try {
    r = await fetch(url(path, params), {
      headers: { Authorization: `Bearer ${bearer || token.get()}`, Accept: 'application/json' },
      cache: 'no-store',
      signal,
    });
  } catch (err) {
    throw new Offline(String(err && err.message ? err.message : err));
  }
  if (r.status === 401) throw new Unauthorized('the token was refused');
  const body = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

/** The log head (no token needed): `/health` answers `{head, …}`. */
export async function health() {
  const r = await fetch('/health', { cache: 'no-store' });
  if (!r.ok) throw new ApiError(r.status, null);
  return r.json();
}
