"""LLM traces: with the setting on (Hindsight's name here), every LLM call is stored with bank,
operation, scope, model, tokens, latency and status, its request and answer bounded; failures too;
listed per bank with filters, and counted per bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engram.settings import Settings
from tests.conftest import RunningServer, start_server
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle

BANKS = "/v1/default/banks"


@pytest.fixture
def traced(isolated_dsn: str, llm: ScriptedLLM) -> Iterator[RunningServer]:
    env = {**llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "HINDSIGHT_API_LLM_TRACE_ENABLED": "true",
           "ENGRAM_LLM_TRACE_MAX_CHARS": "600"}
    running = start_server(isolated_dsn, env, name="llm-traces")
    yield running
    running.stop()


def answer(request):
    if request.schema_name == "ExtractionOutput":
        text = request.user_text.split("Text:\n", 1)[1].strip()
        return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}
    if request.schema_name == "ConsolidationActions":
        return {"creates": []}
    return Reply.tool_calls([("done", {"answer": "Quinn plays the oboe."})])


def test_every_call_is_traced_and_bounded(traced: RunningServer, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = answer
    with traced.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        http.patch(f"{BANKS}/{bank_id}/config", json={"updates": {"enable_observations": False}})
        http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "Quinn plays the oboe."}],
                                                      "async": True}).raise_for_status()
        settle(http, bank_id)
        http.post(f"{BANKS}/{bank_id}/reflect", json={"query": "What does Quinn play?"}).raise_for_status()
        listed = http.get(f"{BANKS}/{bank_id}/llm-requests").json()
        assert listed["total"] == len(llm.requests) == 2
        reflect, retain = listed["items"]  # newest first
        assert (retain["operation"], retain["scope"], reflect["operation"], reflect["scope"]) == (
            "retain", "ExtractionOutput", "reflect", "tools")
        assert retain["trace_id"] and reflect["trace_id"] is None, "the async retain's operation id"
        for entry in (retain, reflect):
            assert entry["status"] == "success" and entry["model"] == "scripted" and entry["duration_ms"] >= 0
            assert (entry["input_tokens"], entry["output_tokens"], entry["total_tokens"]) == (10, 5, 15)
            assert entry["input"]["truncated"] is True and len(entry["input"]["excerpt"]) == 600
        assert "Quinn plays the oboe." in json.dumps(reflect["output"])
        only = http.get(f"{BANKS}/{bank_id}/llm-requests", params={"operation": "reflect"}).json()
        assert [e["id"] for e in only["items"]] == [reflect["id"]]

        llm.enqueue(Reply.error(401, "bad key"))
        http.post(f"{BANKS}/{bank_id}/health/llm").raise_for_status()
        failed = http.get(f"{BANKS}/{bank_id}/llm-requests", params={"status": "error"}).json()["items"]
        assert [(e["operation"], "401" in e["error"]) for e in failed] == [("llm_health", True)]

        stats = http.get(f"{BANKS}/{bank_id}/llm-requests/stats", params={"period": "1h"}).json()
        assert sum(b["total"] for b in stats["buckets"]) == 3
        assert sum(b["statuses"].get("error", 0) for b in stats["buckets"]) == 1
        assert sum(b["tokens"]["total"] for b in stats["buckets"]) == 30
        other = f"{bank_id}-other"
        http.put(f"{BANKS}/{other}", json={}).raise_for_status()
        assert http.get(f"{BANKS}/{other}/llm-requests").json()["total"] == 0


def test_off_unless_enabled(llm_server: RunningServer, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = answer
    with llm_server.client() as http:
        http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "Rosa knits."}]}).raise_for_status()
        assert llm.requests and http.get(f"{BANKS}/{bank_id}/llm-requests").json()["total"] == 0
    assert Settings.from_env({"ENGRAM_LLM_TRACE_ENABLED": "true"}).llm_trace_enabled is True
    assert Settings.from_env({}).llm_trace_enabled is False


def test_traces_outlive_a_failed_request(traced: RunningServer, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = lambda request: Reply.error(500, "overloaded")
    with traced.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        assert http.post(f"{BANKS}/{bank_id}/reflect", json={"query": "anything"}).status_code == 502
        (entry,) = http.get(f"{BANKS}/{bank_id}/llm-requests").json()["items"]
        assert entry["status"] == "error" and "500" in entry["error"] and entry["output"] is None


