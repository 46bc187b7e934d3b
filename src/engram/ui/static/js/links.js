// Page addresses: the hash routes the shell (app.js) understands.

/** `#/b/<bank>/<page>?<params>`; `page` may hold a detail id ("memories/<id>"). */
export function bankHref(bankId, page = "", params = null) {
  const path = `#/b/${encodeURIComponent(bankId)}${page ? `/${page}` : ""}`;
  const search = params ? new URLSearchParams(params).toString() : "";
  return search ? `${path}?${search}` : path;
}
