"""The control plane's audit-log and LLM-traces pages, in headless Chromium, on a server with both
turned on and the scripted LLM: entries and calls listed, one opened, the day's chart drawn."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import RunningServer, separate_database, start_server
from tests.support.scripted_llm import ScriptedLLM


@pytest.fixture(scope="module")
def recording(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    env = {**scripted_llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "ENGRAM_AUDIT_LOG_ENABLED": "true",
           "ENGRAM_LLM_TRACE_ENABLED": "true"}
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, env, name="ui-audit")
        yield running
        running.stop()


def test_audit_log_and_llm_traces_pages(ui, recording: RunningServer, llm: ScriptedLLM) -> None:
    llm.handler = lambda request: {"facts": [{"what": "Xia builds kites.", "fact_type": "world", "entities": ["Xia"]}]}
    bank_id = f"ui-{uuid.uuid4().hex[:8]}"
    with recording.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={"enable_observations": False}).raise_for_status()
        http.post(f"/v1/default/banks/{bank_id}/memories",
                  json={"items": [{"content": "Xia builds kites by the sea."}]}).raise_for_status()
    view = ui(recording)
    page = view.open(f"#/b/{bank_id}/audit")
    rows = page.locator("table.audit tbody tr")
    rows.first.wait_for()
    assert [row.get_attribute("data-action") for row in rows.all()] == ["retain", "create_or_update_bank"]
    assert int(page.locator("svg.bars rect.bar[data-total='2']").count()) == 1
    rows.first.locator("a").click()
    assert "Xia builds kites by the sea." in page.locator("pre.audit-request").inner_text()
    view.screenshot("22-audit-log")

    page = view.open(f"#/b/{bank_id}/traces")
    row = page.locator("table.traces tbody tr")
    row.first.wait_for()
    assert row.count() == 1 and row.first.get_attribute("data-status") == "success"
    cells = row.first.locator("td").all_inner_texts()
    assert cells[1:6] == ["retain", "ExtractionOutput", "scripted", "success", "15"]
    row.first.locator("a").click()
    assert "Xia builds kites by the sea." in page.locator("pre.trace-input").inner_text()
    assert "15 tokens" in page.locator("section h2", has_text="Last 24 hours").inner_text()
    view.screenshot("23-llm-traces")
