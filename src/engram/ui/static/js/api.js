// Calls to the Engram HTTP API on the same origin, with the optional API key from localStorage.

const KEY_STORAGE = "engram.apiKey";

// The API lives next to /ui: strip "/ui/..." from the page's path (keeps a reverse-proxy prefix).
const ROOT = location.pathname.replace(/\/ui(\/.*)?$/, "");
export const API = `${ROOT}/v1/default`;

export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

export function setApiKey(value) {
  if (value) localStorage.setItem(KEY_STORAGE, value);
  else localStorage.removeItem(KEY_STORAGE);
}

/** An API answer that was not 2xx: `status`, the server's `detail`, and `field` for 400s that name one. */
export class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
    this.field = body && typeof body === "object" ? body.field || null : null;
  }
}

function describe(status, body) {
  if (body && typeof body === "object") {
    const detail = body.detail;
    if (Array.isArray(detail)) {
      // FastAPI's request validation errors: one line per problem, with where it is.
      return detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
    }
    if (detail) return String(detail);
  }
  if (status === 401) return "the server wants an API key: enter it at the top right";
  return `HTTP ${status}${typeof body === "string" && body ? `: ${body.slice(0, 200)}` : ""}`;
}

/** `api("GET", "/banks", {query: {limit: 10}})`; arrays in `query` repeat the parameter; `base`
 * replaces the `/v1/default` prefix. */
export function api(method, path, { base = API, ...options } = {}) {
  return request(method, base + path, options);
}

/** A route outside /v1/default, e.g. `apiRoot("GET", "/version")`. */
export function apiRoot(method, path, options = {}) {
  return request(method, ROOT + path, options);
}

async function request(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => url.searchParams.append(name, v));
    else url.searchParams.set(name, String(value));
  }
  const headers = { Accept: "application/json" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text for the error message
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

export const bankPath = (bankId) => `/banks/${encodeURIComponent(bankId)}`;

/** The bank settings' JSON schema: each setting's type, range (minimum/maximum, enum) and default. */
export const configSchema = () => api("GET", "/bank-config-schema", { base: `${ROOT}/v1` });

/** PATCH a bank's config overrides (null drops one); returns the new config or throws the ApiError. */
export function saveConfig(bankId, updates) {
  return api("PATCH", `${bankPath(bankId)}/config`, { body: { updates } });
}
