"""With no LLM, the control plane says consolidation is off (and why, with a link to the setting)
instead of showing facts as pending forever; with an LLM it says nothing of the kind."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import RunningServer


def _bank_with_a_fact(server: RunningServer) -> str:
    bank_id = f"ui-nollm-{uuid.uuid4().hex[:8]}"
    response = httpx.post(f"{server.url}/v1/default/banks/{bank_id}/memories",
                          json={"items": [{"content": "Nadia repaired the lighthouse lamp in Oban."}]})
    assert response.status_code == 200, response.text
    return bank_id


def test_no_llm_is_explained_on_the_overview_memories_and_memory_pages(ui, server: RunningServer) -> None:
    bank_id = _bank_with_a_fact(server)
    view = ui(server)
    page = view.open(f"#/b/{bank_id}")
    off = page.locator(".notice.consolidation-off")
    off.wait_for()
    assert off.inner_text().startswith("Consolidation is off: no LLM configured.")
    assert page.locator(".stat", has_text="not consolidated (off)").locator(".stat-value").inner_text() == "1"
    assert page.locator(".stat", has_text="awaiting consolidation").count() == 0
    view.screenshot("no-llm-overview")

    off.locator("a", has_text="Set ENGRAM_LLM_PROVIDER").click()
    page.locator("#llm-setting").wait_for()
    assert "ENGRAM_LLM_PROVIDER" in page.locator("#llm-setting").inner_text()
    assert "tab=settings" in page.url

    page = view.open(f"#/b/{bank_id}/memories")
    page.locator("table.memories tbody tr").first.wait_for()
    assert page.locator(".notice.consolidation-off").count() == 1
    state = page.locator("table.memories tbody tr td").last
    assert state.inner_text() == "off" and "no LLM configured" in state.locator("span").get_attribute("title")
    assert page.locator("table.memories .badge-pending").count() == 0
    view.screenshot("no-llm-memories")

    page.locator("td.text-cell a").first.click()
    row = page.locator("table.kv tr", has_text="Consolidation")
    row.wait_for()
    assert row.locator("td").inner_text() == "off (no LLM configured) · set ENGRAM_LLM_PROVIDER"
    assert "awaiting" not in page.locator("#main").inner_text()


def test_with_an_llm_facts_await_consolidation(ui, llm_server: RunningServer) -> None:
    bank_id = f"ui-llm-{uuid.uuid4().hex[:8]}"
    httpx.put(f"{llm_server.url}/v1/default/banks/{bank_id}", json={}).raise_for_status()
    view = ui(llm_server)
    page = view.open(f"#/b/{bank_id}")
    page.locator(".stats").wait_for()
    assert page.locator(".stat", has_text="awaiting consolidation").count() == 1
    assert page.locator(".notice.consolidation-off").count() == 0
    page = view.open(f"#/b/{bank_id}/config?tab=settings")
    page.locator("#save-settings").wait_for()
    assert page.locator("#llm-setting").count() == 0
