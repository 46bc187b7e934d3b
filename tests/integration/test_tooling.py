"""Tooling and stats endpoints of issue 17: prompt preview (compared with what the real operations
send the scripted LLM), the LLM probe, the memories time series, consolidation recovery, the dry-run
mental-model refresh, the retired 1.1.0 operations and /version."""

from __future__ import annotations

import httpx
import pytest

import engram
from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle

BANKS = "/v1/default/banks"


def extraction(request) -> dict:
    text = request.user_text.split("Text:\n", 1)[1].strip()
    return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}


def joined(message: dict) -> str:
    return "".join(block["text"] for block in message["blocks"] if block["active"])


def config_blocks(message: dict) -> dict[str, dict]:
    return {block["field"]: block for block in message["blocks"] if block["source"] == "config"}


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


@pytest.fixture
def offline(server: RunningServer) -> httpx.Client:
    with server.client() as client:
        yield client


def test_retain_preview_is_what_retain_sends(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    mission, extra = "Track the user's travel plans.", "Always record airline names."
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    http.patch(f"{BANKS}/{bank_id}/config", json={"updates": {
        "retain_mission": mission, "retain_custom_instructions": extra, "enable_auto_consolidation": False}})
    preview = http.post(f"{BANKS}/{bank_id}/prompts/preview", json={"operation": "retain"}).json()
    system, user = preview["messages"]
    assert [system["role"], user["role"]] == ["system", "user"]
    blocks = config_blocks(system)
    assert blocks["retain_mission"]["value"] == mission and blocks["retain_mission"]["text"] == mission
    assert blocks["retain_custom_instructions"]["text"] == extra
    assert "«the text being retained»" in joined(user)
    assert preview["response_schema"]["properties"]["facts"]

    llm.handler = extraction
    http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "I fly to Oslo."}]}).raise_for_status()
    settle(http, bank_id)
    (sent,) = [r for r in llm.requests if r.schema_name == "ExtractionOutput"]
    assert sent.system_prompt.startswith(joined(system))  # the provider may append its schema instruction


def test_consolidation_and_reflect_previews_match_the_real_calls(http: httpx.Client, llm: ScriptedLLM,
                                                                 bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    http.patch(f"{BANKS}/{bank_id}/config", json={"updates": {
        "observations_mission": "Keep only food preferences.", "reflect_mission": "Answer as a chef."}})
    http.post(f"{BANKS}/{bank_id}/directives", json={"name": "short", "content": "Answer in one line."})
    consolidation = http.post(f"{BANKS}/{bank_id}/prompts/preview", json={"operation": "consolidation"}).json()
    reflect = http.post(f"{BANKS}/{bank_id}/prompts/preview", json={"operation": "reflect"}).json()
    assert config_blocks(consolidation["messages"][0])["observations_mission"]["value"] == "Keep only food preferences."
    assert consolidation["skipped_reason"] is None

    def answer(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        if request.schema_name == "ConsolidationActions":
            return {"creates": []}
        return Reply.tool_calls([("done", {"answer": "ok"})])

    llm.handler = answer
    http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "The user likes figs."}]}).raise_for_status()
    settle(http, bank_id)
    http.post(f"{BANKS}/{bank_id}/reflect", json={"query": "What does the user eat?"}).raise_for_status()
    (sent_consolidation,) = [r for r in llm.requests if r.schema_name == "ConsolidationActions"]
    assert sent_consolidation.system_prompt.startswith(joined(consolidation["messages"][0]))
    sent_reflect = next(r for r in llm.requests if "done" in r.tool_names)
    assert sent_reflect.system_prompt == joined(reflect["messages"][0])
    assert "Answer in one line." in joined(reflect["messages"][0])
    assert config_blocks(reflect["messages"][0])["reflect_mission"]["text"] == "Answer as a chef."


def test_preview_refuses_bad_input(offline: httpx.Client, bank_id: str) -> None:
    offline.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    bad = offline.post(f"{BANKS}/{bank_id}/prompts/preview", json={"operation": "summarise"})
    assert bad.status_code in (400, 422) and "operation" in bad.text
    assert offline.post(f"{BANKS}/{bank_id}/prompts/preview", json={"strategy": "x"}).status_code == 400
    assert offline.post(f"{BANKS}/nope-{bank_id}/prompts/preview", json={}).status_code == 404
    unset = offline.post(f"{BANKS}/{bank_id}/prompts/preview", json={"operation": "retain"}).json()
    inactive = [b["field"] for b in unset["messages"][0]["blocks"] if not b["active"]]
    assert inactive == ["retain_mission", "retain_custom_instructions"]


def test_llm_probe(http: httpx.Client, offline: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    llm.handler = lambda request: "ok"
    health = http.post(f"{BANKS}/{bank_id}/health/llm").json()
    assert [op["operation"] for op in health["operations"]] == ["retain", "consolidation", "reflect"]
    assert all(op["ok"] and op["status"] == "connected" and op["latency_ms"] >= 0 for op in health["operations"])
    assert len(llm.requests) == 1, "one provider: one probe answers for the three operations"

    llm.enqueue(Reply.error(401, "bad key"))
    refused = http.post(f"{BANKS}/{bank_id}/health/llm").json()["operations"][0]
    assert refused["ok"] is False and refused["status"] == "auth_failed" and "401" in refused["error"]

    offline.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    none = offline.post(f"{BANKS}/{bank_id}/health/llm").json()["operations"]
    assert {(op["ok"], op["status"]) for op in none} == {(False, "not_configured")}


def test_memories_timeseries(offline: httpx.Client, bank_id: str) -> None:
    offline.post(f"{BANKS}/{bank_id}/memories", json={"items": [
        {"content": "Alice moved to Berlin in 2020."}, {"content": "Bob plays the cello every Sunday."}]},
    ).raise_for_status()
    counted = offline.get(f"{BANKS}/{bank_id}/memories/list").json()["total"]
    series = offline.get(f"{BANKS}/{bank_id}/stats/memories-timeseries", params={"period": "1h"}).json()
    assert series["trunc"] == "minute" and len(series["buckets"]) == 60
    assert sum(b["world"] + b["experience"] + b["observation"] for b in series["buckets"]) == counted > 0
    week = offline.get(f"{BANKS}/{bank_id}/stats/memories-timeseries",
                       params={"period": "fortnight", "time_field": "1; DROP TABLE banks"}).json()
    assert (week["period"], week["time_field"], len(week["buckets"])) == ("7d", "created_at", 7)
    assert week["buckets"][-1]["time"].endswith("T00:00:00+00:00")
    assert sum(b["world"] + b["experience"] for b in week["buckets"]) == counted


def test_recover_failed_consolidation(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    broken = {"on": True}

    def answer(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        if broken["on"]:
            return Reply.text("not json at all")
        return {"creates": [{"text": "The user hates mornings", "evidence": [{"fact": "F1", "quote": "hates"}]}]}

    llm.handler = answer
    http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "The user hates mornings."}]})
    stats = settle(http, bank_id)
    assert stats["failed_consolidation"] == 1
    broken["on"] = False
    recovered = http.post(f"{BANKS}/{bank_id}/consolidation/recover").json()
    assert recovered["retried_count"] == 1 and recovered["operation_id"]
    stats = settle(http, bank_id)
    assert stats["failed_consolidation"] == 0
    observations = http.get(f"{BANKS}/{bank_id}/memories/list", params={"type": "observation"}).json()["items"]
    assert [o["text"] for o in observations] == ["The user hates mornings"]
    assert http.post(f"{BANKS}/{bank_id}/consolidation/recover").json()["retried_count"] == 0


def test_dry_run_refresh_changes_nothing(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    answers = iter(["The user likes tea.", "The user likes tea and jazz."])

    def agent(request):
        if request.schema_name == "ExtractionOutput":
            return extraction(request)
        if request.schema_name == "ConsolidationActions":
            return {"creates": []}
        return Reply.tool_calls([("done", {"answer": next(answers)})])

    llm.handler = agent
    http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "The user drinks tea."}]})
    http.post(f"{BANKS}/{bank_id}/mental-models", json={
        "id": "tastes", "name": "Tastes", "source_query": "What does the user like?"}).raise_for_status()
    settle(http, bank_id)
    dry = http.post(f"{BANKS}/{bank_id}/mental-models/tastes/dry-run-refresh").json()
    assert dry["outcome"] == "content_written" and dry["would_persist"] is True
    assert dry["current_content"] == "The user likes tea."
    assert dry["candidate_content"] == "The user likes tea and jazz."
    assert "-The user likes tea." in dry["diff"] and "+The user likes tea and jazz." in dry["diff"]
    model = http.get(f"{BANKS}/{bank_id}/mental-models/tastes").json()
    assert model["content"] == "The user likes tea."
    assert http.get(f"{BANKS}/{bank_id}/mental-models/tastes/history").json()["history"] == []
    assert http.post(f"{BANKS}/{bank_id}/mental-models/nope/dry-run-refresh").status_code == 404


def test_retired_operations_and_background(offline: httpx.Client, bank_id: str) -> None:
    offline.put(f"{BANKS}/{bank_id}", json={"mission": "Help with cooking."}).raise_for_status()
    for method in ("GET", "PUT"):
        gone = offline.request(method, f"{BANKS}/{bank_id}/profile", json={"disposition": {}})
        assert gone.status_code == 410 and "GET /v1/default/banks/{bank_id}/config" in gone.json()["detail"]
    regenerate = offline.post(f"{BANKS}/{bank_id}/entities/x/regenerate")
    assert regenerate.status_code == 410 and "no longer supported" in regenerate.json()["detail"]

    merged = offline.post(f"{BANKS}/{bank_id}/background", json={"content": "Vegetarian household."}).json()
    assert merged["mission"] == "Help with cooking.\nVegetarian household." == merged["background"]
    config = offline.get(f"{BANKS}/{bank_id}/config").json()["config"]
    assert config["reflect_mission"] == "Help with cooking.\nVegetarian household."
    assert offline.post(f"{BANKS}/{bank_id}/background", json={}).status_code in (400, 422)


def test_version_names_the_hindsight_api_it_implements(offline: httpx.Client) -> None:
    version = offline.get("/version").json()
    assert version["api_version"] == "1.1.0" and version["engram_version"] == engram.__version__
    assert version["features"]["bank_llm_health"] is True
