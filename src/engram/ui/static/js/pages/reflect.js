// The reflect playground: ask a question, get the answer with what it was based on and the agent's
// trace (every tool call with its input and output, and the LLM calls).

import { api, bankPath } from "../api.js";
import { badge, clear, errorBox, h, section, splitList } from "../dom.js";
import { bankHref } from "../links.js";

function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

function basedOn(ctx, based) {
  if (!based) return null;
  const memories = based.memories || [];
  const items = [
    ...memories.map((m) =>
      h("li", {}, badge(m.type || "memory", m.type), " ", m.id ? h("a", { href: bankHref(ctx.bankId, `memories/${m.id}`) }, m.text) : m.text),
    ),
    ...(based.mental_models || []).map((m) => h("li", {}, badge("mental model", "kind"), ` ${m.text}`)),
    ...(based.directives || []).map((d) => h("li", {}, badge("directive", "kind"), ` ${d.name}: ${d.content}`)),
  ];
  return section("Based on", items.length ? h("ul", { class: "plain" }, items) : h("p", { class: "muted" }, "Nothing cited."));
}

function traceSection(trace) {
  if (!trace) return null;
  const calls = trace.tool_calls.map((call, i) =>
    h(
      "tr",
      { class: "tool-call" },
      h("td", { class: "num" }, String(i + 1)),
      h("td", { class: "num" }, String(call.iteration)),
      h("td", {}, h("code", {}, call.tool)),
      h("td", {}, json(call.input)),
      h("td", {}, call.output ? h("details", {}, h("summary", {}, "output"), json(call.output)) : h("span", { class: "muted" }, "–")),
      h("td", { class: "num" }, `${call.duration_ms} ms`),
    ),
  );
  const llm = trace.llm_calls.map((call) => h("span", { class: "chip" }, `${call.scope} ${call.duration_ms} ms`));
  return section(
    `Trace: ${trace.tool_calls.length} tool call${trace.tool_calls.length === 1 ? "" : "s"}, ${trace.llm_calls.length} LLM call${trace.llm_calls.length === 1 ? "" : "s"}`,
    calls.length
      ? h(
          "table",
          { class: "grid trace" },
          h("thead", {}, h("tr", {}, ["#", "Iteration", "Tool", "Input", "Output", "Time"].map((t) => h("th", { class: ["#", "Iteration", "Time"].includes(t) ? "num" : null }, t)))),
          h("tbody", {}, calls),
        )
      : h("p", { class: "muted" }, "No tool calls."),
    llm.length ? h("div", { class: "chips" }, llm) : null,
  );
}

export async function renderReflect(ctx) {
  const output = h("div", { id: "reflect-output" });
  const form = h(
    "form",
    { class: "playground", id: "reflect-form" },
    h("textarea", { name: "query", rows: 2, placeholder: "Ask a question about this bank's memories", required: true }),
    h(
      "div",
      { class: "filters" },
      h("label", {}, "Budget ", h("select", { name: "budget" }, ["low", "mid", "high"].map((b) => h("option", { value: b }, b)))),
      h("label", {}, "Context ", h("input", { name: "context", placeholder: "optional" })),
      h("label", {}, "Tags ", h("input", { name: "tags", placeholder: "tag1, tag2" })),
      h("button", { type: "submit" }, "Reflect"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      query: data.get("query"),
      budget: data.get("budget"),
      include: { facts: {}, tool_calls: { output: true } },
    };
    if (data.get("context")) body.context = data.get("context");
    const tags = splitList(data.get("tags"));
    if (tags.length) body.tags = tags;
    clear(output, h("p", { class: "muted" }, "Thinking…"));
    try {
      const response = await api("POST", `${bankPath(ctx.bankId)}/reflect`, { body });
      if (!ctx.alive()) return;
      const usage = response.usage;
      clear(
        output,
        section(
          "Answer",
          h("div", { class: "answer" }, response.text),
          usage ? h("p", { class: "muted small" }, `${usage.input_tokens} in / ${usage.output_tokens} out tokens`) : null,
        ),
        basedOn(ctx, response.based_on),
        traceSection(response.trace),
      );
    } catch (error) {
      if (ctx.alive()) clear(output, errorBox(error));
    }
  });
  clear(
    ctx.main,
    h("h1", {}, "Reflect playground"),
    h("p", { class: "muted" }, "Reflect answers with the configured LLM, searching memory with tools; the trace shows each step."),
    section(null, form),
    output,
  );
}
