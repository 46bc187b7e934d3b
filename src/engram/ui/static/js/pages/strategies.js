// The consolidation-strategies editor. Every edit re-runs POST …/consolidation-strategies/preview on
// the draft (nothing saved), so each strategy shows which of the bank's observation scopes it would
// claim; Save writes the list into the bank's config.

import { api, bankPath, saveConfig } from "../api.js";
import { clear, clearFlash, debounce, errorBox, h, markInvalid, section, splitList, tagChips } from "../dom.js";

const INT_SETTINGS = [
  ["max_observations_per_scope", "Max observations per scope"],
  ["consolidation_source_facts_max_tokens", "Source facts budget (tokens)"],
  ["consolidation_source_facts_max_tokens_per_observation", "… per observation"],
];
const SAMPLES = 10;

function fromWire(list) {
  return (list || []).map((s) => ({
    scopes: (s.scopes || []).map((rule) => ({ tags: (rule.tags || []).join(", "), tags_match: rule.tags_match || "all" })),
    observations_mission: s.observations_mission ?? "",
    ...Object.fromEntries(INT_SETTINGS.map(([name]) => [name, s[name] ?? ""])),
  }));
}

function toWire(list) {
  return list.map((s) => {
    const out = { scopes: s.scopes.map((rule) => ({ tags: splitList(rule.tags), tags_match: rule.tags_match })) };
    if (s.observations_mission.trim()) out.observations_mission = s.observations_mission;
    for (const [name] of INT_SETTINGS) {
      const text = String(s[name]).trim();
      if (text === "") continue;
      out[name] = /^-?\d+$/.test(text) ? Number(text) : text; // a non-integer is the server's to name
    }
    return out;
  });
}

function emptyStrategy() {
  return {
    scopes: [{ tags: "", tags_match: "all" }],
    observations_mission: "",
    ...Object.fromEntries(INT_SETTINGS.map(([name]) => [name, ""])),
  };
}

function sampleChips(samples) {
  return h(
    "div",
    { class: "chips" },
    samples.map((sample) =>
      h(
        "span",
        { class: "chip sample", title: sample.handled_by == null ? "bank default" : `handled by strategy ${sample.handled_by + 1}` },
        sample.tags.length ? sample.tags.join(" + ") : "untagged",
        ` · ${sample.count}`,
      ),
    ),
  );
}

function strategyPreview(result) {
  return h(
    "div",
    { class: "preview-result" },
    h(
      "div",
      {},
      result.active ? h("span", { class: "badge badge-completed" }, "active") : h("span", { class: "badge badge-pending", title: "needs tags and at least one setting" }, "inactive"),
      h("strong", { class: "claimed" }, ` claims ${result.claimed_count} scope${result.claimed_count === 1 ? "" : "s"}`),
    ),
    result.rules.map((rule, j) =>
      h(
        "div",
        { class: "small rule-preview" },
        `Alternative ${j + 1}: matches ${rule.match_count} scope${rule.match_count === 1 ? "" : "s"} (${rule.observation_count} observation${rule.observation_count === 1 ? "" : "s"})`,
        rule.taken_count ? `, ${rule.taken_count} already taken by an earlier strategy` : "",
        rule.samples.length ? sampleChips(rule.samples) : null,
      ),
    ),
  );
}

export function strategiesEditor(ctx, config, scopes, reload) {
  let strategies = fromWire(config.config.consolidation_strategies);
  const editor = h("div", { class: "strategies", id: "strategies-editor" });
  const message = h("div", { class: "message" });
  const defaultBox = h("div", { id: "preview-default" });
  const status = h("div", { class: "small muted", id: "preview-status" });
  let previewSlots = [];
  let sequence = 0;

  async function runPreview() {
    const mine = ++sequence;
    clear(status, "previewing…");
    try {
      const result = await api("POST", `${bankPath(ctx.bankId)}/consolidation-strategies/preview`, {
        body: { strategies: toWire(strategies), sample_limit: SAMPLES },
      });
      if (mine !== sequence || !ctx.alive()) return;
      markInvalid(editor, null);
      clear(message);
      result.strategies.forEach((item, i) => previewSlots[i] && clear(previewSlots[i], strategyPreview(item)));
      clear(
        defaultBox,
        h("strong", {}, `Left to the bank-wide settings: ${result.default.match_count} scope${result.default.match_count === 1 ? "" : "s"}, ${result.default.observation_count} observation${result.default.observation_count === 1 ? "" : "s"}`),
        result.default.samples.length ? sampleChips(result.default.samples) : null,
      );
      clear(status, `${result.scopes_scanned} scope${result.scopes_scanned === 1 ? "" : "s"} scanned${result.complete ? "" : " (not all)"}`);
    } catch (error) {
      if (mine !== sequence || !ctx.alive()) return;
      clear(message, errorBox(error));
      clear(status, "preview failed");
      markInvalid(editor, error.field);
    }
  }
  const preview = debounce(runPreview, 250);

  const edit = (target, name) => (event) => {
    target[name] = event.target.value;
    preview();
  };

  function ruleRow(strategy, rule, i, j) {
    const path = `strategies[${i}].scopes[${j}]`;
    return h(
      "div",
      { class: "row rule", "data-path": path },
      h("input", { class: "grow rule-tags", "data-path": `${path}.tags`, value: rule.tags, placeholder: "tag patterns, e.g. user:*, team", oninput: edit(rule, "tags") }),
      h(
        "select",
        { class: "rule-match", "data-path": `${path}.tags_match`, onchange: edit(rule, "tags_match") },
        ["all", "exact"].map((m) => h("option", { value: m, selected: m === rule.tags_match }, m === "all" ? "all (scope has every pattern)" : "exact (and nothing else)")),
      ),
      h("button", { type: "button", class: "icon-button", title: "Remove alternative", onclick: () => { strategy.scopes.splice(j, 1); render(); } }, "×"),
    );
  }

  function card(strategy, i) {
    const path = `strategies[${i}]`;
    const slot = h("div", { class: "preview-slot" }, h("span", { class: "muted small" }, "…"));
    previewSlots[i] = slot;
    const move = (to) => {
      const [item] = strategies.splice(i, 1);
      strategies.splice(to, 0, item);
      render();
    };
    return h(
      "div",
      { class: "strategy", "data-path": path },
      h(
        "div",
        { class: "row strategy-head" },
        h("strong", {}, `Strategy ${i + 1}`),
        h("span", { class: "grow" }),
        h("button", { type: "button", class: "icon-button", title: "Move up", disabled: i === 0, onclick: () => move(i - 1) }, "↑"),
        h("button", { type: "button", class: "icon-button", title: "Move down", disabled: i === strategies.length - 1, onclick: () => move(i + 1) }, "↓"),
        h("button", { type: "button", class: "small-button danger", onclick: () => { strategies.splice(i, 1); render(); } }, "Remove"),
      ),
      h("div", { class: "small muted" }, "Claims scopes matching any alternative:"),
      strategy.scopes.map((rule, j) => ruleRow(strategy, rule, i, j)),
      h("button", { type: "button", class: "small-button secondary", onclick: () => { strategy.scopes.push({ tags: "", tags_match: "all" }); render(); } }, "+ alternative"),
      h(
        "label",
        { class: "block", "data-path": `${path}.observations_mission` },
        "Observations mission",
        h("textarea", { rows: 2, class: "mission", value: strategy.observations_mission, placeholder: "what to keep for these scopes (empty: the bank's)", oninput: edit(strategy, "observations_mission") }),
      ),
      h(
        "div",
        { class: "row" },
        INT_SETTINGS.map(([name, label]) =>
          h("label", { "data-path": `${path}.${name}` }, `${label} `, h("input", { class: "narrow", name, value: strategy[name], placeholder: "bank's", oninput: edit(strategy, name) })),
        ),
      ),
      slot,
    );
  }

  function render() {
    previewSlots = [];
    clear(
      editor,
      strategies.length ? strategies.map(card) : h("p", { class: "muted" }, "No strategies: every scope uses the bank-wide settings."),
      h("button", { type: "button", id: "add-strategy", class: "secondary", onclick: () => { strategies.push(emptyStrategy()); render(); } }, "+ strategy"),
    );
    runPreview();
  }

  async function save() {
    clearFlash();
    try {
      await saveConfig(ctx.bankId, { consolidation_strategies: strategies.length ? toWire(strategies) : null });
      reload(`Consolidation strategies saved (${strategies.length}).`);
    } catch (error) {
      clear(message, errorBox(error));
      markInvalid(editor, error.field ? error.field.replace(/^updates\.consolidation_strategies/, "strategies") : null);
    }
  }

  render();
  return h(
    "div",
    { class: "columns wide-left" },
    section(
      "Consolidation strategies",
      h("p", { class: "muted small" }, "The first strategy matching a scope handles it whole; patterns are globs; the untagged scope is never claimed."),
      message,
      editor,
      h("div", { class: "actions" }, h("button", { type: "button", id: "save-strategies", onclick: save }, "Save strategies")),
    ),
    section(
      "Live preview",
      status,
      defaultBox,
      h("h3", {}, `Scopes in this bank (${scopes.total})`),
      scopes.scopes.length
        ? h("ul", { class: "plain scope-list" }, scopes.scopes.map((scope) => h("li", {}, tagChips(scope.tags, "untagged (global)"), h("span", { class: "muted small" }, ` ${scope.count}`))))
        : h("p", { class: "muted" }, "No observations yet."),
    ),
  );
}
