"""The control plane at /ui, in headless Chromium against live servers: a bank seeded through the API,
then every page used as a person would — bank list, memories table and filters, memory and
observation detail, entity graph, observations by scope, recall and reflect playgrounds, the config
editor (entity-label builder, strategies with live preview) and operations with retry.
Each page is saved as a screenshot in tests/artifacts/screenshots/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, _admin, start_server
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle

ONBOARDING = "Alice joined Acme as a designer last March. Bob works with Alice at Acme in Paris."
TRAVEL = "Carol visited Berlin with Dave. Alice met Carol in Berlin."
BUDGET = "Erin reviewed the Acme budget with Bob."

REACT = "The user loves React for frontend work."
REACT_AGAIN = "The user built another React dashboard and enjoyed it."
DOG = "The user adopted a dog named Biscuit."




def retain(http: httpx.Client, bank_id: str, content: str, **item: Any) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": content, **item}]})
    assert response.status_code == 200, response.text


# --- a bank retained with no LLM: facts, entities, chunks ------------------------------------------


@pytest.fixture(scope="module")
def offline_bank(server: RunningServer) -> Iterator[str]:
    bank_id = f"ui-{uuid.uuid4().hex[:8]}"
    with server.client() as http:
        retain(http, bank_id, ONBOARDING, tags=["team"], document_id="onboarding")
        retain(http, bank_id, TRAVEL, tags=["travel"])
        retain(http, bank_id, BUDGET, tags=["team", "finance"])
    yield bank_id


def test_the_bank_list_shows_each_bank_with_its_stats(ui, server: RunningServer, offline_bank: str) -> None:
    view = ui(server)
    page = view.open()
    row = page.locator(f"tr[data-bank='{offline_bank}']")
    row.wait_for()
    cells = row.locator("td")
    page.wait_for_function(
        "bank => !document.querySelector(`tr[data-bank='${bank}']`).textContent.includes('…')", arg=offline_bank
    )
    assert cells.nth(1).inner_text() == "5", "five facts: one per sentence"
    assert cells.nth(3).inner_text() == "3", "three documents"
    view.screenshot("01-banks")

    row.locator("a").first.click()
    page.locator(".stats").wait_for()
    assert page.locator(".stat", has_text="world facts").locator(".stat-value").inner_text() == "5"
    assert page.locator(".chips a", has_text="finance · 1").count() == 1
    view.screenshot("02-bank-overview")


def test_the_memories_table_lists_facts_and_filters_them(ui, server: RunningServer, offline_bank: str) -> None:
    view = ui(server)
    page = view.open(f"#/b/{offline_bank}/memories")
    rows = page.locator("table.memories tbody tr")
    rows.first.wait_for()
    assert rows.count() == 5
    assert page.locator("#memory-count").inner_text() == "1–5 of 5"
    view.screenshot("03-memories")

    page.select_option("select[name=type]", "experience")
    page.click("#memory-filters button[type=submit]")
    page.locator("p.empty").wait_for()
    assert rows.count() == 0, "no experience facts were retained"

    page.select_option("select[name=type]", "world")
    page.fill("input[name=tags]", "travel")
    page.select_option("select[name=tags_match]", "all_strict")
    page.click("#memory-filters button[type=submit]")
    page.wait_for_function("() => document.querySelector('#memory-count')?.textContent === '1–2 of 2'")
    assert sorted(rows.locator("td.text-cell").all_inner_texts()) == ["Alice met Carol in Berlin.",
                                                                      "Carol visited Berlin with Dave."]
    assert "type=world" in page.url and "tags=travel" in page.url, "filters are in the address"
    view.screenshot("04-memories-filtered")


def test_a_memory_shows_its_entities_and_source_chunk(ui, server: RunningServer, offline_bank: str) -> None:
    view = ui(server)
    page = view.open(f"#/b/{offline_bank}/memories")
    page.locator("a", has_text="Bob works with Alice at Acme in Paris.").click()
    page.locator("pre.chunk").wait_for()
    assert sorted(page.locator(".chips.entities .chip").all_inner_texts()) == ["Acme", "Alice", "Bob", "Paris"]
    assert page.locator("pre.chunk").inner_text() == ONBOARDING, "the whole chunk the fact came from"
    assert "onboarding" in page.locator("section", has_text="Source chunk").inner_text()
    view.screenshot("05-memory-detail")


def test_the_entity_graph_draws_every_entity_and_pair(ui, server: RunningServer, offline_bank: str) -> None:
    with server.client() as http:
        graph = http.get(f"/v1/default/banks/{offline_bank}/entities/graph").json()
        listed = http.get(f"/v1/default/banks/{offline_bank}/entities").json()["items"]
    view = ui(server)
    page = view.open(f"#/b/{offline_bank}/entities")
    page.locator("#graph svg").wait_for()
    assert page.locator("#graph svg g.node").count() == len(graph["nodes"]) >= 7
    assert page.locator("#graph svg line.edge").count() == len(graph["edges"]) > 0
    names = page.locator("table.entities tbody tr td:first-child").all_inner_texts()
    assert names == [e["canonical_name"] for e in listed], "most mentioned first"
    view.screenshot("06-entities")

    page.locator("#graph svg g.node", has_text="Carol").locator("circle").click()
    page.locator("h1", has_text="Carol").wait_for()
    partners = page.locator("section", has_text="Co-occurs with").locator("a").all_inner_texts()
    assert {"Alice", "Berlin", "Dave"} <= set(partners)


def test_the_recall_playground_shows_each_arms_rank_and_the_final_score(
    ui, server: RunningServer, offline_bank: str
) -> None:
    view = ui(server)
    page = view.open(f"#/b/{offline_bank}/recall")
    page.fill("#recall-form textarea[name=query]", "Where does Alice work?")
    page.click("#recall-form button[type=submit]")
    table = page.locator("table.recall-results")
    table.wait_for()
    headers = table.locator("thead th").all_inner_texts()
    assert headers[3:5] == ["semantic", "keyword"] and headers[-1] == "Final"
    first = table.locator("tbody tr").first
    assert first.locator("td.arm-semantic").inner_text() == "#1"
    assert float(first.locator("td.final").inner_text()) > 0
    assert "semantic:" in page.locator(".trace-summary").inner_text()
    view.screenshot("07-recall")


def test_reflect_without_an_llm_shows_the_servers_reason(ui, server: RunningServer, offline_bank: str) -> None:
    view = ui(server, expected_http_errors=True)
    page = view.open(f"#/b/{offline_bank}/reflect")
    page.fill("#reflect-form textarea[name=query]", "Where does Alice work?")
    page.click("#reflect-form button[type=submit]")
    error = page.locator("#reflect-output .error")
    error.wait_for()
    assert "Error 400" in error.inner_text() and "ENGRAM_LLM_PROVIDER" in error.inner_text()
    view.screenshot("08-reflect-no-llm")


def test_the_label_builder_saves_a_group_and_points_at_a_malformed_one(
    ui, server: RunningServer, bank_id: str
) -> None:
    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    view = ui(server, expected_http_errors=True)
    page = view.open(f"#/b/{bank_id}/config")
    page.click("#add-label-group")
    group = page.locator(".label-group").nth(0)
    group.locator("input.label-key").fill("priority")
    group.locator("input.label-value").nth(0).fill("urgent")
    group.locator("button.add-value").click()
    group.locator("input.label-value").nth(1).fill("later")
    group.locator("input.label-tag").check()
    page.click("#save-labels")
    page.locator(".notice-ok", has_text="Entity labels saved (1 group)").wait_for()
    with server.client() as http:
        labels = http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"]["entity_labels"]
    assert labels == [{"key": "priority", "type": "value", "optional": True, "tag": True,
                       "values": [{"value": "urgent"}, {"value": "later"}]}]
    assert page.locator("input.label-key").input_value() == "priority", "the saved vocabulary is shown again"
    view.screenshot("09-config-labels")

    page.click("#add-label-group")
    account = page.locator(".label-group").nth(1)
    account.locator("input.label-key").fill("account")
    account.locator("select.label-type").first.select_option("map")
    account.locator("button.add-field").click()
    account.locator("input.field-name").fill("tier")  # a 'value' field with no values
    page.click("#save-labels")
    error = page.locator("#labels-message .error")
    error.wait_for()
    assert error.locator("code").inner_text() == "updates.entity_labels[1].fields.tier.values"
    assert "at least one allowed value" in error.inner_text()
    assert page.locator(".invalid").get_attribute("data-path") == "entity_labels[1].fields.tier.values"
    view.screenshot("10-config-labels-error")
    with server.client() as http:
        assert len(http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"]["entity_labels"]) == 1


def test_the_settings_tab_names_a_wrong_value_and_saves_a_right_one(
    ui, server: RunningServer, bank_id: str
) -> None:
    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    view = ui(server, expected_http_errors=True)
    page = view.open(f"#/b/{bank_id}/config?tab=settings")
    chunk_size = page.locator("tr[data-path='retain_chunk_size'] input")
    assert chunk_size.input_value() == "3000"
    chunk_size.fill("big")
    page.click("#save-settings")
    error = page.locator(".error")
    error.wait_for()
    assert error.locator("code").inner_text() == "updates.retain_chunk_size"
    assert page.locator("tr.invalid").get_attribute("data-path") == "retain_chunk_size"

    chunk_size.fill("2000")
    page.click("#save-settings")
    page.locator(".notice-ok", has_text="Saved 1 setting").wait_for()
    assert page.locator("tr[data-path='retain_chunk_size'] .badge-override").count() == 1
    view.screenshot("11-config-settings")
    with server.client() as http:
        assert http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"] == {"retain_chunk_size": 2000}


def test_the_settings_tab_shows_each_range_and_flags_a_stored_invalid_value(
    ui, server: RunningServer, pg_dsn: str, bank_id: str
) -> None:
    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    _admin(pg_dsn, f"UPDATE banks SET config = '{{\"disposition_empathy\": 9}}' WHERE bank_id = '{bank_id}'")
    page = ui(server).open(f"#/b/{bank_id}/config?tab=settings")
    assert page.locator("tr[data-path='retain_chunk_size'] .rule").inner_text() == "50 … 1000000"
    assert page.locator("tr[data-path='retain_extraction_mode'] .rule").inner_text().startswith("one of concise")
    badge = page.locator("tr[data-path='disposition_empathy'] .badge-invalid")
    assert badge.inner_text() == "invalid — ignored"
    assert "between 1 and 5" in badge.get_attribute("title")
    assert page.locator("tr[data-path='disposition_empathy'] input").input_value() == "3", "the default applies"


def test_the_api_key_field_is_sent_as_a_bearer_token(ui, isolated_dsn: str, bank_id: str) -> None:
    secured = start_server(isolated_dsn, {"ENGRAM_API_KEYS": "ui-secret"}, name="ui-auth")
    try:
        with secured.client() as http:
            http.put(f"/v1/default/banks/{bank_id}", json={},
                     headers={"Authorization": "Bearer ui-secret"}).raise_for_status()
        view = ui(secured, expected_http_errors=True)
        # The page's own files hold no data, but the server guards /ui too: the browser gets them
        # with the key here, so what is tested is the UI's API calls carrying the key from the field.
        view.page.route("**/ui/**", lambda route: route.continue_(
            headers={**route.request.headers, "authorization": "Bearer ui-secret"}))
        page = view.open()
        error = page.locator("main .error")
        error.wait_for()
        assert "Error 401" in error.inner_text() and "missing API key" in error.inner_text()

        page.fill("#apikey", "ui-secret")
        page.click("#apikey-form button")
        page.locator(f"tr[data-bank='{bank_id}']").wait_for()
        page.reload()
        page.locator(f"tr[data-bank='{bank_id}']").wait_for()  # remembered in localStorage
        assert page.locator("#apikey").input_value() == "ui-secret"
    finally:
        secured.stop()


def test_the_operations_page_lists_async_work(ui, server: RunningServer, offline_bank: str) -> None:
    with server.client() as http:
        response = http.post(f"/v1/default/banks/{offline_bank}/memories",
                             json={"items": [{"content": "Frank plays the cello."}], "async": True})
        operation_id = response.json()["operation_id"]
    view = ui(server)
    page = view.open(f"#/b/{offline_bank}/operations")
    row = page.locator(f"tr[data-id='{operation_id}']")
    row.wait_for()
    assert row.locator("td").nth(1).inner_text() == "retain"
    page.locator(f"tr[data-id='{operation_id}'][data-status='completed']").wait_for()  # auto-refresh
    view.screenshot("12-operations")


# --- a bank consolidated by the scripted LLM: observations, evidence, history, strategies --------


def fact_handle(request: Any, text: str) -> str | None:
    """The handle (F1, F2…) the consolidation prompt gave the fact `text`."""
    for line in request.user_text.splitlines():
        if line.startswith("F") and line.endswith(text):
            return line.split(" ", 1)[0]
    return None


def observation_handle(request: Any, words: str) -> str | None:
    for line in request.user_text.splitlines():
        if line.startswith("O") and words in line:
            return line.split(" ", 1)[0]
    return None


def extraction(request: Any) -> dict:
    text = request.user_text.split("Text:\n", 1)[1].strip()
    return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}


def consolidation(request: Any) -> dict:
    if handle := fact_handle(request, REACT):
        return {"creates": [{"text": "The user prefers React for frontend development",
                             "evidence": [{"fact": handle, "quote": "loves React"}]}]}
    if handle := fact_handle(request, REACT_AGAIN):
        return {"updates": [{"observation": observation_handle(request, "React"),
                             "text": "The user consistently prefers React for frontend development",
                             "evidence": [{"fact": handle, "quote": "enjoyed it"}],
                             "reason": "confirmed by a second project"}]}
    if handle := fact_handle(request, DOG):
        return {"creates": [{"text": "The user has a dog named Biscuit",
                             "evidence": [{"fact": handle, "quote": "a dog named Biscuit"}]}]}
    return {"creates": [], "updates": [], "deletes": []}


def memory_llm(request: Any) -> Any:
    if request.schema_name == "ExtractionOutput":
        return extraction(request)
    if request.schema_name == "ConsolidationActions":
        return consolidation(request)
    if request.schema_name == "MergeDecision":
        return {"decision": "keep", "text": None}
    return Reply.error(400, f"unexpected request {request.schema_name}")


@pytest.fixture(scope="module")
def observed_bank(llm_server: RunningServer, scripted_llm: ScriptedLLM) -> Iterator[str]:
    bank_id = f"ui-obs-{uuid.uuid4().hex[:8]}"
    scripted_llm.reset()
    scripted_llm.handler = memory_llm
    with llm_server.client() as http:
        for text, tags in ((REACT, ["team"]), (REACT_AGAIN, ["team"]), (DOG, ["home"])):
            retain(http, bank_id, text, tags=tags)
            settle(http, bank_id)
        observations = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "observation"}).json()
    scripted_llm.reset()
    assert sorted(o["text"] for o in observations["items"]) == [
        "The user consistently prefers React for frontend development", "The user has a dog named Biscuit"]
    yield bank_id


def test_observations_are_grouped_by_scope(ui, llm_server: RunningServer, observed_bank: str) -> None:
    view = ui(llm_server)
    page = view.open(f"#/b/{observed_bank}/observations")
    team = page.locator("section.scope[data-scope='team']")
    team.wait_for()
    assert team.locator("td.text-cell").all_inner_texts() == [
        "The user consistently prefers React for frontend development"]
    assert page.locator("section.scope[data-scope='home'] td.text-cell").all_inner_texts() == [
        "The user has a dog named Biscuit"]
    view.screenshot("13-observations")


def test_an_observation_shows_its_evidence_proof_count_and_history(
    ui, llm_server: RunningServer, observed_bank: str
) -> None:
    view = ui(llm_server)
    page = view.open(f"#/b/{observed_bank}/observations")
    page.locator("a", has_text="consistently prefers React").click()
    page.locator(".proof-count").wait_for()
    assert page.locator(".proof-count").inner_text() == "Proof count: 2"
    assert page.locator("blockquote.quote").all_inner_texts() == ["“loves React”", "“enjoyed it”"]
    evidence = page.locator("ol.evidence").inner_text()
    assert REACT in evidence and REACT_AGAIN in evidence, "each quote with the fact it comes from"
    history = page.locator("ol.history .history-item")
    assert history.count() == 1
    assert "The user prefers React for frontend development" in history.inner_text()
    assert "confirmed by a second project" in history.inner_text()
    view.screenshot("14-observation-detail")


def test_the_strategy_preview_counts_what_a_draft_would_claim(
    ui, llm_server: RunningServer, observed_bank: str
) -> None:
    view = ui(llm_server, expected_http_errors=True)
    page = view.open(f"#/b/{observed_bank}/config?tab=strategies")
    page.click("#add-strategy")
    strategy = page.locator(".strategy").nth(0)
    strategy.locator("input.rule-tags").fill("team")
    strategy.locator("textarea.mission").fill("Keep what the team prefers.")
    claimed = strategy.locator(".claimed")
    page.wait_for_function("() => document.querySelector('.strategy .claimed')?.textContent.includes('claims 1 scope')")
    assert "claims 1 scope" in claimed.inner_text()
    assert "matches 1 scope (1 observation)" in strategy.locator(".rule-preview").inner_text()
    page.wait_for_function("() => document.querySelector('#preview-default')?.textContent.includes('1 scope')")
    assert "home · 1" in page.locator("#preview-default").inner_text(), "the scope no strategy claims"
    view.screenshot("15-strategies-preview")

    strategy.locator("input[name=max_observations_per_scope]").fill("many")
    error = page.locator(".error", has_text="must be an integer")
    error.wait_for()
    assert error.locator("code").inner_text() == "strategies[0].max_observations_per_scope"
    strategy.locator("input[name=max_observations_per_scope]").fill("20")
    error.wait_for(state="detached")
    page.click("#save-strategies")
    page.locator(".notice-ok", has_text="Consolidation strategies saved (1)").wait_for()
    with llm_server.client() as http:
        saved = http.get(f"/v1/default/banks/{observed_bank}/config").json()["overrides"]["consolidation_strategies"]
    assert saved == [{"scopes": [{"tags": ["team"], "tags_match": "all"}],
                      "observations_mission": "Keep what the team prefers.", "max_observations_per_scope": 20}]


def test_the_reflect_playground_shows_the_answer_and_its_trace(
    ui, llm_server: RunningServer, llm: ScriptedLLM, observed_bank: str
) -> None:
    def agent(request: Any) -> Reply:
        if not any(m.get("role") == "tool" for m in request.messages):
            return Reply.tool_calls([("recall", {"query": "frontend framework"})])
        return Reply.tool_calls([("done", {"answer": "The user prefers React.", "memory_ids": []})])

    llm.handler = agent
    view = ui(llm_server)
    page = view.open(f"#/b/{observed_bank}/reflect")
    page.fill("#reflect-form textarea[name=query]", "Which frontend framework does the user like?")
    page.click("#reflect-form button[type=submit]")
    page.locator(".answer").wait_for()
    assert page.locator(".answer").inner_text() == "The user prefers React."
    calls = page.locator("tr.tool-call")
    assert calls.count() == 1 and calls.locator("code").inner_text() == "recall"
    assert "frontend framework" in calls.locator("pre.json").first.inner_text()
    view.screenshot("16-reflect")


def test_a_failed_operation_is_retried_from_the_operations_page(
    ui, llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = lambda request: Reply.error(500, "upstream model crashed")
    with llm_server.client() as http:
        response = http.post(f"/v1/default/banks/{bank_id}/memories",
                             json={"items": [{"content": "Gina repairs old radios."}], "async": True})
        operation_id = response.json()["operation_id"]
    view = ui(llm_server)
    page = view.open(f"#/b/{bank_id}/operations")
    failed = page.locator(f"tr[data-id='{operation_id}'][data-status='failed']")
    failed.wait_for()
    assert "500" in failed.locator("td.error-cell").inner_text()
    view.screenshot("17-operations-failed")

    llm.handler = memory_llm
    failed.locator("button.retry").click()
    page.locator(".notice-ok", has_text="queued again").wait_for()
    page.locator(f"tr[data-id='{operation_id}'][data-status='completed']").wait_for()
    assert page.locator(f"tr[data-id='{operation_id}'] td").nth(7).inner_text() == "1", "one retry"
    with llm_server.client() as http:
        settle(http, bank_id)  # the consolidation the retain queued talks to the LLM: not after this test
