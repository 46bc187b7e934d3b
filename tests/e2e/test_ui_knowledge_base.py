"""The control plane's knowledge-base page in headless Chromium: add a folder and a page in it, see
the tree, open the page once the scripted LLM's refresh has written it."""

from __future__ import annotations

import uuid

from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle


def test_folders_and_pages_in_the_ui(ui, llm_server: RunningServer, llm: ScriptedLLM) -> None:
    llm.handler = lambda request: Reply.tool_calls([("done", {"answer": "Lunch is at noon in the atrium."})])
    bank_id = f"ui-{uuid.uuid4().hex[:8]}"
    with llm_server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    view = ui(llm_server)
    page = view.open(f"#/b/{bank_id}/knowledge")
    page.locator("#kb-tree p.empty").wait_for()
    page.fill("#kb-folder-form input[name=name]", "Office")
    page.click("#kb-folder-form button[type=submit]")
    page.locator("#kb-tree li[data-kind=folder]", has_text="Office").wait_for()
    page.fill("#kb-page-form input[name=name]", "Lunch")
    page.fill("#kb-page-form input[name=source_query]", "When is lunch?")
    page.select_option("#kb-page-form select[name=parent_id]", label="Office")
    page.click("#kb-page-form button[type=submit]")
    link = page.locator("#kb-tree li[data-kind=folder] li[data-kind=page] a", has_text="Lunch")
    link.wait_for()
    with llm_server.client() as http:
        settle(http, bank_id)
    link.click()
    page.locator("#kb-page .kb-body", has_text="Lunch is at noon in the atrium.").wait_for()
    assert page.locator("pre.kb-markdown").inner_text().startswith("---")
    view.screenshot("24-knowledge-base")
