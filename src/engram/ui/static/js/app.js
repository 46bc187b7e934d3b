// The shell: hash routing (#/b/<bank>/<page>?<params>), the bank navigation and the API key field.

import { api, apiKey, bankPath, setApiKey } from "./api.js";
import { clear, errorBox, h } from "./dom.js";
import { bankHref } from "./links.js";
import { renderBanks } from "./pages/banks.js";
import { renderConfig } from "./pages/config.js";
import { renderDocument, renderDocuments } from "./pages/documents.js";
import { renderEntities, renderEntity } from "./pages/entities.js";
import { renderMemories } from "./pages/memories.js";
import { renderMemory } from "./pages/memory.js";
import { renderObservations } from "./pages/observations.js";
import { renderOperations } from "./pages/operations.js";
import { renderOverview } from "./pages/overview.js";
import { renderRecall } from "./pages/recall.js";
import { renderReflect } from "./pages/reflect.js";
import { renderWebhooks } from "./pages/webhooks.js";
import { renderAudit } from "./pages/audit.js";
import { renderTraces } from "./pages/traces.js";
import { renderKnowledge } from "./pages/knowledge.js";

const BANK_PAGES = [
  ["", "Overview", renderOverview],
  ["memories", "Memories", renderMemories],
  ["observations", "Observations", renderObservations],
  ["documents", "Documents", renderDocuments],
  ["entities", "Entities", renderEntities],
  ["recall", "Recall", renderRecall],
  ["reflect", "Reflect", renderReflect],
  ["knowledge", "Knowledge base", renderKnowledge],
  ["config", "Config", renderConfig],
  ["operations", "Operations", renderOperations],
  ["webhooks", "Webhooks", renderWebhooks],
  ["audit", "Audit log", renderAudit],
  ["traces", "LLM traces", renderTraces],
];
const DETAIL_PAGES = { memories: renderMemory, entities: renderEntity, documents: renderDocument };

const main = document.getElementById("main");
const sidenav = document.getElementById("sidenav");
const crumbs = document.getElementById("crumbs");
let cleanup = null;
let generation = 0;

/** The hash as {path segments, params}: "#/b/my%20bank/memories?type=world". */
function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, search = ""] = raw.split("?");
  const segments = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { segments, params: new URLSearchParams(search) };
}

function renderNav(bankId, current) {
  sidenav.hidden = !bankId;
  if (!bankId) return clear(sidenav);
  clear(
    sidenav,
    h("div", { class: "sidenav-bank", title: bankId }, bankId),
    BANK_PAGES.map(([page, label]) =>
      h("a", { href: bankHref(bankId, page), class: page === current ? "active" : null }, label),
    ),
  );
}

function renderCrumbs(bankId, page, detail) {
  const parts = [h("a", { href: "#/" }, "Banks")];
  if (bankId) parts.push(h("a", { href: bankHref(bankId) }, bankId));
  const label = BANK_PAGES.find(([p]) => p === page)?.[1];
  if (bankId && page) parts.push(h("a", { href: bankHref(bankId, page) }, label || page));
  if (detail) parts.push(h("span", {}, detail.slice(0, 8)));
  clear(crumbs, parts.flatMap((part, i) => (i ? [h("span", { class: "sep" }, "/"), part] : [part])));
}

async function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const mine = ++generation;
  const { segments, params } = parseHash();
  let bankId = null;
  let page = "";
  let detail = null;
  let render = renderBanks;
  if (segments[0] === "b" && segments[1]) {
    bankId = segments[1];
    page = segments[2] || "";
    detail = segments[3] || null;
    const entry = BANK_PAGES.find(([p]) => p === page);
    render = detail ? DETAIL_PAGES[page] : entry?.[2];
  }
  renderNav(bankId, page);
  renderCrumbs(bankId, page, detail);
  document.title = bankId ? `${bankId} · Engram` : "Engram";
  const ctx = {
    bankId,
    id: detail,
    params,
    main,
    alive: () => mine === generation,
    onLeave: (fn) => {
      cleanup = fn;
    },
  };
  clear(main, h("p", { class: "muted" }, "Loading…"));
  if (bankId && !(await bankExists(bankId))) {
    if (mine !== generation) return;
    renderNav(null, "");
    renderCrumbs(null, "", null);
    document.title = "Bank not found · Engram";
    clear(
      main,
      h("h1", { id: "not-found" }, "404 · Bank not found"),
      h("p", {}, "There is no bank ", h("code", {}, bankId), " on this server. A bank is created by its first retain."),
      h("a", { href: "#/" }, "Back to the banks"),
    );
    return;
  }
  if (mine !== generation) return;
  if (!render) {
    clear(main, h("h1", {}, "Not found"), h("p", {}, "No page here. "), h("a", { href: "#/" }, "Back to the banks"));
    return;
  }
  try {
    await render(ctx);
  } catch (error) {
    if (!ctx.alive()) return;
    clear(main, errorBox(error));
    if (error.status === 401) document.getElementById("apikey").classList.add("invalid");
  }
}

const knownBanks = new Set();

/** Whether the bank exists (asked once per bank and page load; a failure other than 404 counts as yes,
 * so the page itself shows that error). */
async function bankExists(bankId) {
  if (knownBanks.has(bankId)) return true;
  try {
    await api("GET", `${bankPath(bankId)}/config`);
  } catch (error) {
    if (error.status === 404) return false;
    return true;
  }
  knownBanks.add(bankId);
  return true;
}

function setUpApiKey() {
  const input = document.getElementById("apikey");
  input.value = apiKey();
  document.getElementById("apikey-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setApiKey(input.value.trim());
    input.classList.remove("invalid");
    route();
  });
}

setUpApiKey();
window.addEventListener("hashchange", route);
route();
