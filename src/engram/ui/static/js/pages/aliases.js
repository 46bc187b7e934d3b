// The bank's aliases, as a section of its overview: other ids that reach this bank; one can be the
// name it is shown under (primary).

import { api, bankPath } from "../api.js";
import { clear, errorBox, h, notice, section } from "../dom.js";

export function aliasesSection(ctx) {
  const base = `${bankPath(ctx.bankId)}/aliases`;
  const message = h("div", { id: "aliases-message" });
  const list = h("div", { id: "aliases-list" });

  async function act(method, path, body, done) {
    try {
      const answer = await api(method, `${base}${path}`, body ? { body } : {});
      clear(message, notice(done));
      show(answer.aliases);
    } catch (error) {
      clear(message, errorBox(error));
    }
  }

  function show(aliases) {
    if (!aliases.length) return clear(list, h("p", { class: "muted empty" }, "No aliases."));
    const path = (alias) => `/${encodeURIComponent(alias)}`;
    clear(
      list,
      h(
        "ul",
        { class: "aliases" },
        aliases.map((a) =>
          h(
            "li",
            { "data-alias": a.alias },
            h("code", {}, a.alias),
            a.primary ? h("span", { class: "badge primary" }, " primary ") : null,
            h("button", { class: "small-button secondary primary-toggle", type: "button", onclick: () =>
              act("PATCH", path(a.alias), { primary: !a.primary }, a.primary ? "Alias no longer primary." : "Alias is now primary.") },
              a.primary ? "Unset primary" : "Make primary"),
            h("button", { class: "small-button secondary remove", type: "button", onclick: () => act("DELETE", path(a.alias), null, "Alias removed.") }, "Remove"),
          ),
        ),
      ),
    );
  }

  const form = h(
    "form",
    { id: "alias-form" },
    h("input", { name: "alias", required: true, placeholder: "another id for this bank" }),
    h("button", { type: "submit" }, "Add alias"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await act("POST", "", { alias: new FormData(form).get("alias") }, "Alias added.");
    form.reset();
  });
  api("GET", base).then((answer) => ctx.alive() && show(answer.aliases), (error) => clear(list, errorBox(error)));
  return section("Aliases", message, list, form);
}
