// Entities: the list (search, sort, paging), the co-occurrence graph, and one entity's detail.

import { api, bankPath } from "../api.js";
import { badge, clear, fmtCount, fmtDate, h, pageRange, section } from "../dom.js";
import { graphSvg } from "../graph.js";
import { bankHref } from "../links.js";

const PAGE = 50;
const GRAPH_LIMIT = 150;
const ENTITY_TYPES = ["person", "organisation", "place", "product", "concept"];

// The entity's own observation (regenerated from its recent facts) is marked, and flagged when stale.
function observationItem(o) {
  if (o.source !== "entity") return h("li", {}, o.text);
  return h(
    "li",
    { class: "entity-observation" },
    o.text,
    " ",
    o.stale ? badge("stale", "stale") : badge("up to date"),
    h("span", { class: "muted small" }, ` generated ${fmtDate(o.generated_at)}`),
  );
}

function entityList(ctx, result, offset) {
  const rows = result.items.map((entity) =>
    h(
      "tr",
      { "data-id": entity.id },
      h("td", {}, h("a", { href: bankHref(ctx.bankId, `entities/${entity.id}`) }, entity.canonical_name)),
      h("td", {}, badge(entity.metadata?.entity_kind || "free", "kind")),
      h("td", {}, entity.metadata?.entity_type || ""),
      h("td", { class: "num" }, fmtCount(entity.mention_count)),
      h("td", { class: "nowrap" }, fmtDate(entity.first_seen)),
      h("td", { class: "nowrap" }, fmtDate(entity.last_seen)),
    ),
  );
  const params = (to) => {
    const out = {};
    for (const name of ["q", "sort", "entity_type"]) if (ctx.params.get(name)) out[name] = ctx.params.get(name);
    out.offset = String(to);
    return bankHref(ctx.bankId, "entities", out);
  };
  return [
    rows.length
      ? h(
          "table",
          { class: "grid entities" },
          h("thead", {}, h("tr", {}, ["Name", "Kind", "Type", "Mentions", "First seen", "Last seen"].map((t) => h("th", { class: t === "Mentions" ? "num" : null }, t)))),
          h("tbody", {}, rows),
        )
      : h("p", { class: "muted" }, "No entities."),
    h(
      "div",
      { class: "pager" },
      pageRange(offset, result.items.length, result.total),
      offset > 0 ? h("a", { href: params(Math.max(0, offset - PAGE)) }, "‹ Previous") : null,
      offset + PAGE < result.total ? h("a", { href: params(offset + PAGE) }, "Next ›") : null,
    ),
  ];
}

export async function renderEntities(ctx) {
  const base = bankPath(ctx.bankId);
  const offset = Number(ctx.params.get("offset") || 0);
  const q = ctx.params.get("q") || "";
  const sort = ctx.params.get("sort") || "mentions";
  const entityType = ctx.params.get("entity_type") || "";
  const [list, graph] = await Promise.all([
    api("GET", `${base}/entities`, { query: { q, sort, limit: PAGE, offset, ...(entityType ? { entity_type: entityType } : {}) } }),
    api("GET", `${base}/entities/graph`, { query: { limit: GRAPH_LIMIT } }),
  ]);
  if (!ctx.alive()) return;

  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        const params = { sort: data.get("sort") };
        if (data.get("q")) params.q = data.get("q");
        if (data.get("entity_type")) params.entity_type = data.get("entity_type");
        location.hash = bankHref(ctx.bankId, "entities", params);
      },
    },
    h("input", { type: "search", name: "q", value: q, placeholder: "name or alias" }),
    h(
      "select",
      { name: "sort" },
      ["mentions", "name", "recent"].map((option) => h("option", { value: option, selected: option === sort }, `by ${option}`)),
    ),
    h(
      "select",
      { name: "entity_type" },
      ["", ...ENTITY_TYPES].map((option) => h("option", { value: option, selected: option === entityType }, option || "any type")),
    ),
    h("button", { type: "submit" }, "Search"),
  );

  const nodes = graph.nodes.map((n) => ({ id: n.data.id, label: n.data.label, weight: n.data.mentionCount }));
  const edges = graph.edges.map((e) => ({ source: e.data.source, target: e.data.target, weight: e.data.weight }));
  const picture = nodes.length
    ? graphSvg(nodes, edges, { onSelect: (node) => (location.hash = bankHref(ctx.bankId, `entities/${node.id}`)) })
    : h("p", { class: "muted" }, "No entities yet.");

  clear(
    ctx.main,
    h("h1", {}, "Entities"),
    section(
      "Co-occurrence graph",
      h(
        "p",
        { class: "muted small", id: "graph-summary" },
        `${fmtCount(graph.nodes.length)} of ${fmtCount(graph.total_entities)} entities, ${fmtCount(graph.edges.length)} of ${fmtCount(graph.total_edges)} pairs. `,
        "Size = mentions, thickness = facts in common. Hover a node to see its neighbours, click it to open it.",
      ),
      h("div", { id: "graph" }, picture),
    ),
    section("List", form, entityList(ctx, list, offset)),
  );
}

export async function renderEntity(ctx) {
  const entity = await api("GET", `${bankPath(ctx.bankId)}/entities/${encodeURIComponent(ctx.id)}`);
  if (!ctx.alive()) return;
  const facts = entity.facts.map((fact) =>
    h(
      "li",
      {},
      h("a", { href: bankHref(ctx.bankId, `memories/${fact.id}`) }, fact.text),
      " ",
      badge(fact.type),
      h("span", { class: "muted small" }, ` ${fmtDate(fact.mentioned_at)}`),
    ),
  );
  clear(
    ctx.main,
    h("h1", {}, entity.canonical_name, " ", badge(entity.metadata?.entity_kind || "free", "kind")),
    h(
      "div",
      { class: "columns" },
      section(
        "Entity",
        h(
          "table",
          { class: "kv" },
          h(
            "tbody",
            {},
            h("tr", {}, h("th", {}, "Type"), h("td", {}, entity.metadata?.entity_type || "unknown")),
            h("tr", {}, h("th", {}, "Mentions"), h("td", {}, fmtCount(entity.mention_count))),
            h("tr", {}, h("th", {}, "First seen"), h("td", {}, fmtDate(entity.first_seen))),
            h("tr", {}, h("th", {}, "Last seen"), h("td", {}, fmtDate(entity.last_seen))),
            h("tr", {}, h("th", {}, "Aliases"), h("td", {}, entity.aliases.join(", ") || "none")),
          ),
        ),
      ),
      section(
        "Co-occurs with",
        entity.cooccurring.length
          ? h(
              "ul",
              { class: "plain" },
              entity.cooccurring.map((p) =>
                h("li", {}, h("a", { href: bankHref(ctx.bankId, `entities/${p.entity_id}`) }, p.canonical_name), ` · ${fmtCount(p.count)}`),
              ),
            )
          : h("p", { class: "muted" }, "Nothing."),
      ),
    ),
    section(`Facts (${facts.length})`, facts.length ? h("ul", { class: "plain facts" }, facts) : h("p", { class: "muted" }, "None.")),
    entity.observations.length
      ? section("Observations", h("ul", { class: "plain" }, entity.observations.map(observationItem)))
      : null,
  );
}
