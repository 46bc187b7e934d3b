// A tiny element builder and the formatting the pages share. Text always goes in as text nodes,
// never as HTML, so memory contents cannot inject markup.

const SVG_NS = "http://www.w3.org/2000/svg";
const PROPS = new Set(["value", "checked", "disabled", "selected", "hidden", "open"]);

function build(element, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (PROPS.has(name)) {
      element[name] = value;
    } else if (name === "class") {
      element.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else if (child instanceof Node) element.appendChild(child);
    else element.appendChild(document.createTextNode(String(child)));
  }
}

/** `h("a", {href: "#/", class: "x", onclick: fn}, "text", otherNode, [more])` */
export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** "2026-03-01 14:05" (UTC) from an ISO timestamp; "" for none. */
export function fmtDate(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toISOString().replace("T", " ").slice(0, 16);
}

/** 12345 → "12,345": counts with thousands separators, the same in every browser language (as the CLI). */
export function fmtCount(value) {
  if (value === undefined || value === null || value === "") return "";
  return Number(value).toLocaleString("en-US");
}

/** "51–100 of 12,345": where a page of a longer list is. */
export function pageRange(offset, shown, total) {
  return `${fmtCount(total ? offset + 1 : 0)}–${fmtCount(offset + shown)} of ${fmtCount(total)}`;
}

export function fmtNumber(value, digits = 3) {
  if (value === undefined || value === null) return "–";
  return Number.isInteger(value) ? String(value) : Number(value).toFixed(digits);
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "";
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${String(kind).replace(/[^a-z0-9_-]/gi, "")}` }, text);
}

export function tagChips(tags, empty = "untagged") {
  if (!tags || tags.length === 0) return h("span", { class: "muted" }, empty);
  return h("span", { class: "chips" }, tags.map((tag) => h("span", { class: "chip" }, tag)));
}

/** Comma-separated input → list of trimmed, non-empty strings. */
export function splitList(text) {
  return String(text || "")
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
}

/** An error box: the server's message, and the field it names (400s) in its own line. */
export function errorBox(error) {
  return h(
    "div",
    { class: "error", role: "alert" },
    h("strong", {}, error.status ? `Error ${error.status}: ` : "Error: "),
    error.message || String(error),
    error.field ? h("div", { class: "error-field" }, "field: ", h("code", {}, error.field)) : null,
  );
}

export function notice(text, kind = "ok") {
  return h("div", { class: `notice notice-${kind}`, role: "status" }, text);
}

export function section(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...children);
}

/** A two-column table of label → value rows (rows with an empty value are left out). */
export function facts(rows) {
  return h(
    "table",
    { class: "kv" },
    h(
      "tbody",
      {},
      rows
        .filter(([, value]) => value !== undefined && value !== null && value !== "")
        .map(([label, value]) => h("tr", {}, h("th", {}, label), h("td", {}, value))),
    ),
  );
}

/** Drop the "saved" notice a previous save left, before showing the outcome of a new one. */
export function clearFlash() {
  document.getElementById("config-flash")?.remove();
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** Show an element with `data-path` equal to `path` (or the closest enclosing entry) as invalid. */
export function markInvalid(root, path) {
  root.querySelectorAll(".invalid").forEach((el) => el.classList.remove("invalid"));
  if (!path) return null;
  let probe = path;
  while (probe) {
    const target = root.querySelector(`[data-path="${CSS.escape(probe)}"]`);
    if (target) {
      target.classList.add("invalid");
      target.scrollIntoView({ block: "nearest" });
      return target;
    }
    const cut = Math.max(probe.lastIndexOf("."), probe.lastIndexOf("["));
    probe = cut > 0 ? probe.slice(0, cut) : "";
  }
  return null;
}
