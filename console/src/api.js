// The HTTP API as the console calls it. The API key lives in sessionStorage (gone when the tab closes) and travels
// only in the Authorization header, never in a URL and never in a cookie: a browser attaches neither to a request
// another site makes, so there is no cross-site request forgery to defend against (docs/console.md).

const KEY = "graphrecall.key";

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

export function getKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** Percent-encode one path segment (user and session ids may hold spaces, '#' or non-ASCII). */
export const seg = (s) => encodeURIComponent(s);

/** GET or POST ``path`` with the key; a JSON answer, or an ApiError carrying the server's code and message. */
export async function api(path, { method = "GET", query = {}, body } = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) params.append(k, String(one));
  }
  const url = path + (params.toString() ? `?${params}` : "");
  const headers = { Accept: "application/json" };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(response.status, e.code || "error", e.message || `HTTP ${response.status}`, e.field);
  }
  return data;
}
