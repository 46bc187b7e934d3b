// The knowledge base: the folder/page tree, a page's content and markdown, and forms to add a folder
// or a page (whose content the mental-model refresh writes, so it appears once that has run).

import { api, bankPath } from "../api.js";
import { clear, errorBox, h, notice, section } from "../dom.js";

export async function renderKnowledge(ctx) {
  const base = `${bankPath(ctx.bankId)}/knowledge-base`;
  const message = h("div", { id: "kb-message" });
  const treeBox = h("div", { id: "kb-tree" });
  const pageBox = h("div", { id: "kb-page" });
  let folders = [];

  async function openPage(id) {
    try {
      const page = await api("GET", `${base}/pages/${encodeURIComponent(id)}`);
      clear(pageBox, section(page.name,
        page.body ? h("div", { class: "kb-body" }, page.body) : h("p", { class: "muted" }, "Content not written yet."),
        h("h3", {}, "Markdown"), h("pre", { class: "kb-markdown" }, page.markdown)));
    } catch (error) {
      clear(pageBox, errorBox(error));
    }
  }

  function item(node) {
    const label = node.kind === "page"
      ? h("a", { href: "javascript:void 0", class: "kb-page-link", onclick: () => openPage(node.id) }, node.name)
      : h("strong", { class: "kb-folder" }, node.name);
    return h("li", { "data-id": node.id, "data-kind": node.kind }, label,
      node.children.length ? h("ul", {}, node.children.map(item)) : null);
  }

  function collectFolders(nodes, depth = 0) {
    return nodes.flatMap((n) => (n.kind === "folder" ? [[n, depth], ...collectFolders(n.children, depth + 1)] : []));
  }

  async function refresh() {
    const tree = await api("GET", `${base}/tree`);
    if (!ctx.alive()) return;
    folders = collectFolders(tree.roots);
    clear(treeBox, tree.roots.length ? h("ul", { class: "kb-tree" }, tree.roots.map(item)) : h("p", { class: "muted empty" }, "Empty."));
    for (const select of document.querySelectorAll("select.kb-parent")) {
      clear(select, h("option", { value: "" }, "(top level)"),
        folders.map(([f, depth]) => h("option", { value: f.id }, `${"· ".repeat(depth)}${f.name}`)));
    }
  }

  async function submit(form, path, body, done) {
    try {
      await api("POST", `${base}/${path}`, { body });
      clear(message, notice(done));
      form.reset();
    } catch (error) {
      clear(message, errorBox(error));
    }
    await refresh();
  }

  const parent = () => h("select", { name: "parent_id", class: "kb-parent" });
  const folderForm = h("form", { id: "kb-folder-form" },
    h("input", { name: "name", required: true, placeholder: "folder name" }), parent(), h("button", { type: "submit" }, "Add folder"));
  folderForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(folderForm);
    submit(folderForm, "folders", { name: data.get("name"), parent_id: data.get("parent_id") || null }, "Folder added.");
  });
  const pageForm = h("form", { id: "kb-page-form" },
    h("input", { name: "name", required: true, placeholder: "page name" }),
    h("input", { name: "source_query", required: true, placeholder: "the question this page answers", size: 40 }),
    parent(), h("button", { type: "submit" }, "Add page"));
  pageForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(pageForm);
    submit(pageForm, "pages", { name: data.get("name"), source_query: data.get("source_query"),
      parent_id: data.get("parent_id") || null }, "Page added: its content is being written.");
  });

  clear(ctx.main, h("h1", {}, "Knowledge base"), message,
    h("div", { class: "columns" }, section("Tree", treeBox, folderForm, pageForm), pageBox));
  await refresh();
}
