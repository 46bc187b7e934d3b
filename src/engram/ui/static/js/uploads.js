// Raw transfers the JSON helper cannot make: multipart uploads, byte downloads (attachments shown
// inline, archives saved), both with the API key; and polling an operation until it ends.

import { API, ApiError, apiKey, api, bankPath } from "./api.js";

function headers() {
  const key = apiKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

async function failed(response) {
  const text = await response.text();
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text
  }
  return new ApiError(response.status, body);
}

/** POST a FormData to `path` (under /v1/default), with optional query parameters; the JSON answer. */
export async function upload(path, form, query = {}) {
  const url = new URL(API + path, location.origin);
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== "") url.searchParams.set(name, value);
  const response = await fetch(url, { method: "POST", headers: headers(), body: form });
  if (!response.ok) throw await failed(response);
  return response.json();
}

/** The bytes at an API URL ("/v1/default/…", as attachment and download URLs are) as a Blob. */
export async function fetchBlob(url) {
  const response = await fetch(new URL(API.replace(/\/v1\/default$/, "") + url, location.origin), { headers: headers() });
  if (!response.ok) throw await failed(response);
  return response.blob();
}

/** Poll an operation until it is completed, failed or cancelled; `onProgress(status)` on each poll. */
export async function waitForOperation(bankId, operationId, onProgress = () => {}, alive = () => true) {
  for (;;) {
    const status = await api("GET", `${bankPath(bankId)}/operations/${operationId}`);
    onProgress(status);
    if (["completed", "failed", "cancelled"].includes(status.status) || !alive()) return status;
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
}

/** Save a Blob as a file in the browser. */
export function saveBlob(blob, filename) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = filename;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}
