"""Reflect with a scripted LLM walking the agent loop, directives as hard rules, structured output,
mental models (refresh, staleness, refresh after consolidation) and the no-LLM answer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from engram.reflect.agent import TOOL_CALLS_AT_ONCE
from tests.conftest import RunningServer, scripted_server
from tests.support.database import query, table_locked
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle, wait_for


def extraction(request) -> dict:
    text = request.user_text.split("Text:\n", 1)[1].strip()
    return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}


def tool_outputs(request) -> list[dict]:
    return [json.loads(m["content"]) for m in request.messages if m.get("role") == "tool"]


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client




def test_the_agent_checks_stale_observations_against_raw_facts(http: httpx.Client, llm: ScriptedLLM,
                                                               bank_id: str) -> None:
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
    llm.handler = extraction
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user moved to Lisbon in May 2024."}]}).raise_for_status()
    http.post(f"/v1/default/banks/{bank_id}/directives",
              json={"name": "tone", "content": "Always answer in one sentence.", "priority": 5}).raise_for_status()

    def agent(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        outputs = tool_outputs(request)
        if not outputs:
            return Reply.tool_calls([("search_observations", {"query": "where does the user live"})])
        if len(outputs) == 1:
            assert outputs[0]["freshness"] == "slightly_stale"
            return Reply.tool_calls([("recall", {"query": "user moved"})])
        memory_id = outputs[1]["memories"][0]["id"]
        return Reply.tool_calls([("done", {"answer": "The user lives in Lisbon.", "memory_ids": [memory_id]})])

    llm.handler = agent
    response = http.post(f"/v1/default/banks/{bank_id}/reflect", json={
        "query": "Where does the user live?", "include": {"facts": {}, "tool_calls": {}}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["text"] == "The user lives in Lisbon."
    (memory,) = body["based_on"]["memories"]
    assert "Lisbon" in memory["text"]
    assert [d["name"] for d in body["based_on"]["directives"]] == ["tone"]
    assert [c["tool"] for c in body["trace"]["tool_calls"]] == ["search_observations", "recall"]
    assert body["usage"]["total_tokens"] > 0

    system = llm.requests[-1].system_prompt
    assert "Always answer in one sentence." in system and "DIRECTIVES" in system
    assert "freshness" in system, "the prompt tells the model to verify stale observations"


def test_tagged_directives_apply_only_to_matching_requests(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    http.post(f"/v1/default/banks/{bank_id}/directives",
              json={"name": "legal", "content": "Mention the disclaimer.", "tags": ["team:legal"]}).raise_for_status()
    llm.handler = lambda request: Reply.tool_calls([("done", {"answer": "ok"})])
    http.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "hi"}).raise_for_status()
    assert "Mention the disclaimer." not in llm.requests[-1].system_prompt
    http.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "hi", "tags": ["team:legal"]}).raise_for_status()
    assert "Mention the disclaimer." in llm.requests[-1].system_prompt
    http.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "hi", "apply_all_directives": True}
              ).raise_for_status()
    assert "Mention the disclaimer." in llm.requests[-1].system_prompt


def test_response_schema_yields_structured_output(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    def agent(request):
        if request.schema_name == "reflect_response":
            return {"city": "Lisbon"}
        return Reply.tool_calls([("done", {"answer": "Lisbon"})])

    llm.handler = agent
    body = http.post(f"/v1/default/banks/{bank_id}/reflect",
                     json={"query": "Which city?", "response_schema": schema}).json()
    assert body["structured_output"] == {"city": "Lisbon"}
    llm.handler = lambda request: {"town": "Lisbon"} if request.schema_name == "reflect_response" else \
        Reply.tool_calls([("done", {"answer": "Lisbon"})])
    body = http.post(f"/v1/default/banks/{bank_id}/reflect",
                     json={"query": "Which city?", "response_schema": schema}).json()
    assert body["structured_output_error"] == "missing required field 'city'"


@pytest.fixture(scope="module")
def reflect_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    """A server on a database of its own, which the test can lock."""
    with scripted_server(pg_dsn, scripted_llm, "reflect-tools") as served:
        yield served


def test_one_answers_tool_calls_run_at_once_and_go_back_in_order(
    reflect_server: tuple[RunningServer, str], llm: ScriptedLLM, bank_id: str
) -> None:
    """Six searches asked in one answer: four of them wait on the locked mental models at once (one
    after another until session 36; never all of a model's calls, which would take the pool's
    connections), and their results go back in the order asked."""
    server, dsn = reflect_server
    queries = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]

    def agent(request):
        if not tool_outputs(request):
            return Reply.tool_calls([("search_mental_models", {"query": q}) for q in queries])
        return Reply.tool_calls([("done", {"answer": "nothing modelled yet"})])

    llm.handler = agent

    def reflect() -> httpx.Response:
        with server.client() as http:
            return http.post(f"/v1/default/banks/{bank_id}/reflect",
                             json={"query": "?", "include": {"tool_calls": {}}}, timeout=60)

    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    waiting = ("SELECT count(*) AS n FROM pg_stat_activity"
               " WHERE wait_event_type = 'Lock' AND datname = current_database()")
    with ThreadPoolExecutor(1) as thread:
        with table_locked(dsn, "mental_models", "ACCESS EXCLUSIVE"):
            answered = thread.submit(reflect)
            wait_for(lambda: query(dsn, waiting)[0]["n"] == TOOL_CALLS_AT_ONCE, "four searches to wait at once", 15)
            time.sleep(0.5)
            assert query(dsn, waiting)[0]["n"] == TOOL_CALLS_AT_ONCE, "no more than four at once"
        response = answered.result()
    assert response.status_code == 200, response.text
    assert [c["input"]["query"] for c in response.json()["trace"]["tool_calls"]] == queries
    second = llm.requests[-1]
    asked = [call["id"] for call in second.messages[-len(queries) - 1]["tool_calls"]]
    answered_ids = [m["tool_call_id"] for m in second.messages if m.get("role") == "tool"]
    assert answered_ids == asked, "each result after the call it answers, in the order asked"


def test_the_last_iteration_forces_done(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()

    def curious(request):
        forced = request.get("tool_choice")
        if isinstance(forced, dict):
            return Reply.tool_calls([("done", {"answer": "giving up"})])
        return Reply.tool_calls([("recall", {"query": "more"})])

    llm.handler = curious
    body = http.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "?", "budget": "low",
                                                                   "include": {"tool_calls": {}}}).json()
    assert body["text"] == "giving up"
    assert len(body["trace"]["tool_calls"]) == 4, "low budget: 5 iterations, the fifth forced to done"


def test_mental_model_refresh_staleness_and_history(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
    answers = iter(["The user likes tea.", "The user likes tea and jazz."])

    def agent(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        return Reply.tool_calls([("done", {"answer": next(answers)})])

    llm.handler = agent
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user drinks tea.", "tags": ["user:1"]}]}).raise_for_status()
    created = http.post(f"/v1/default/banks/{bank_id}/mental-models", json={
        "id": "tastes", "name": "Tastes", "source_query": "What does the user like?", "tags": ["user:1"]}).json()
    assert created["mental_model_id"] == "tastes"
    settle(http, bank_id)
    model = http.get(f"/v1/default/banks/{bank_id}/mental-models/tastes").json()
    assert model["content"] == "The user likes tea." and model["is_stale"] is False

    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user loves jazz.", "tags": ["user:1"]}]}).raise_for_status()
    assert http.get(f"/v1/default/banks/{bank_id}/mental-models/tastes").json()["is_stale"] is True
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "Unrelated note.", "tags": ["user:2"]}]}).raise_for_status()

    op = http.post(f"/v1/default/banks/{bank_id}/mental-models/tastes/refresh").json()
    settle(http, bank_id)
    status = http.get(f"/v1/default/banks/{bank_id}/operations/{op['operation_id']}").json()
    assert status["details"]["outcome"] == "content_written"
    model = http.get(f"/v1/default/banks/{bank_id}/mental-models/tastes").json()
    assert model["content"] == "The user likes tea and jazz." and model["is_stale"] is False
    history = http.get(f"/v1/default/banks/{bank_id}/mental-models/tastes/history").json()["history"]
    assert [h["content"] for h in history] == ["The user likes tea."]

    cleared = http.post(f"/v1/default/banks/{bank_id}/mental-models/tastes/clear").json()
    assert cleared["content"] is None


def test_refresh_after_consolidation(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    def agent(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        if request.schema_name == "ConsolidationActions":
            return {"creates": [{"text": "The user bakes bread", "evidence": [{"fact": "F1", "quote": "bread"}]}]}
        return Reply.tool_calls([("done", {"answer": f"answer #{len(llm.requests)}"})])

    llm.handler = agent
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    http.post(f"/v1/default/banks/{bank_id}/mental-models", json={
        "id": "hobbies", "name": "Hobbies", "source_query": "Hobbies?",
        "trigger": {"refresh_after_consolidation": True}}).raise_for_status()
    settle(http, bank_id)
    first = http.get(f"/v1/default/banks/{bank_id}/mental-models/hobbies").json()["last_refreshed_at"]
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user bakes bread on Sundays."}]}).raise_for_status()
    settle(http, bank_id)
    model = http.get(f"/v1/default/banks/{bank_id}/mental-models/hobbies").json()
    assert model["last_refreshed_at"] > first, "the consolidation that changed observations refreshed it"


def test_bad_cron_is_refused(http: httpx.Client, bank_id: str) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/mental-models", json={
        "name": "x", "source_query": "y", "trigger": {"refresh_cron": "every tuesday"}})
    assert response.status_code == 400 and response.json()["field"] == "trigger.refresh_cron"


def test_without_an_llm_reflect_says_what_to_configure(server: RunningServer, bank_id: str) -> None:
    with server.client() as client:
        client.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
        response = client.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "anything?"})
        assert response.status_code == 400
        assert "ENGRAM_LLM_PROVIDER" in response.json()["detail"]
        created = client.post(f"/v1/default/banks/{bank_id}/mental-models", json={"name": "x", "source_query": "y"})
        assert created.status_code == 400 and "ENGRAM_LLM_PROVIDER" in created.json()["detail"]
