"""Editing through the real server: a document's tags carried to its facts and their observations
rebuilt in the new scope, a memory's text edited (re-embedded, its observation re-consolidated),
a document's history, reprocessing from the stored text, and a dry run of extraction."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import RunningServer
from tests.integration.test_consolidation import Script, fact_line, observation_handle, observations
from tests.support.scripted_llm import ScriptedLLM
from tests.support.waiting import settle, wait_for

BERLIN = "Alice moved to Berlin in 2019."


@pytest.fixture
def llm_http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


def _observe_each_fact(request):
    """Consolidation: one observation per new fact, worded from the fact (kept when it exists)."""
    creates = []
    for line in request.user_text.splitlines():
        if line.startswith("F") and ": " in line:
            handle, text = line.split(" ", 1)[0], line.split(": ", 1)[1]
            if observation_handle(request, text) is None:
                creates.append({"text": "Observed: " + text, "evidence": [{"fact": handle, "quote": text[:20]}]})
    return {"creates": creates}


def _retain(http: httpx.Client, bank_id: str, text: str, **item: object) -> None:
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": text, **item}]}).raise_for_status()
    settle(http, bank_id)


def _facts(http: httpx.Client, bank_id: str, **params: object) -> list[dict]:
    return http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "world", **params}).json()["items"]


def test_retag_document_carries_tags_to_facts_and_rebuilds_observations(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    Script(llm).decide = _observe_each_fact
    _retain(llm_http, bank_id, BERLIN, document_id="doc-1", tags=["team:a"])
    (before,) = observations(llm_http, bank_id)
    assert before["tags"] == ["team:a"]

    answer = llm_http.patch(f"/v1/default/banks/{bank_id}/documents/doc-1", json={"tags": ["team:b", "vip"]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["success"] is True
    settle(llm_http, bank_id)

    document = llm_http.get(f"/v1/default/banks/{bank_id}/documents/doc-1").json()
    assert document["tags"] == ["team:b", "vip"]
    assert all(f["tags"] == ["team:b", "vip"] for f in _facts(llm_http, bank_id)), "the facts carry the new tags"
    (after,) = observations(llm_http, bank_id)
    assert after["id"] != before["id"], "the old scope's observation was removed"
    assert sorted(after["tags"]) == ["team:b", "vip"], "and rebuilt in the new scope"

    history = llm_http.get(f"/v1/default/banks/{bank_id}/documents/doc-1/history").json()
    kinds = [event["kind"] for event in history["items"]]
    assert kinds == ["retag", "retain"] and history["total"] == 2
    assert history["items"][0]["observations_removed"]["ids"] == [before["id"]]
    assert history["items"][1]["facts_added"] == 1

    scoped = llm_http.patch(f"/v1/default/banks/{bank_id}/documents/doc-1", json={"observation_scopes": "per_tag"})
    assert scoped.status_code == 200
    assert llm_http.get(f"/v1/default/banks/{bank_id}/documents/doc-1").json()["observation_scopes"] == "per_tag"
    assert llm_http.get(f"/v1/default/banks/{bank_id}/memories/{_facts(llm_http, bank_id)[0]['id']}").json()[
        "observation_scopes"] == "per_tag"
    settle(llm_http, bank_id)


def test_edit_memory_text_reembeds_and_reconsolidates_its_observation(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    script = Script(llm)
    script.decide = _observe_each_fact
    _retain(llm_http, bank_id, BERLIN, document_id="doc-2")
    (fact,) = _facts(llm_http, bank_id)
    (observation,) = observations(llm_http, bank_id)
    edited = "Alice moved to Lisbon in 2021."
    shown: list[str] = []

    def decide(request):
        shown.append(request.user_text)
        handle = fact_line(request, edited)
        target = observation_handle(request, "Berlin")
        if handle and target:
            return {"updates": [{"observation": target, "text": "Alice lives in Lisbon since 2021",
                                 "evidence": [{"fact": handle, "quote": "moved to Lisbon"}], "reason": "edited"}]}
        return {}

    script.decide = decide
    answer = llm_http.patch(f"/v1/default/banks/{bank_id}/memories/{fact['id']}", json={"text": edited})
    assert answer.status_code == 200, answer.text
    settle(llm_http, bank_id)

    detail = llm_http.get(f"/v1/default/banks/{bank_id}/memories/{fact['id']}").json()
    assert detail["text"] == edited and detail["edited_at"]
    assert shown and fact_line_in(shown[-1], edited), "the edited fact went back to consolidation"
    (rewritten,) = observations(llm_http, bank_id)
    assert rewritten["id"] == observation["id"] and rewritten["text"] == "Alice lives in Lisbon since 2021"
    recalled = llm_http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                             json={"query": "Lisbon", "types": ["world"]}).json()["results"]
    assert recalled and recalled[0]["id"] == fact["id"], "the new wording is what is searched"
    kinds = [e["kind"] for e in llm_http.get(f"/v1/default/banks/{bank_id}/documents/doc-2/history").json()["items"]]
    assert kinds[0] == "fact_edited"


def fact_line_in(text: str, fact: str) -> bool:
    return any(line.startswith("F") and line.endswith(fact) for line in text.splitlines())


def test_memory_edit_dates_entities_state_and_bad_fields(http: httpx.Client, bank_id: str) -> None:
    _retain(http, bank_id, "Bob repaired the printer.", document_id="d")
    (fact,) = _facts(http, bank_id)
    url = f"/v1/default/banks/{bank_id}/memories/{fact['id']}"
    answer = http.patch(url, json={"occurred_start": "2024-03-01T10:00:00Z", "entities": ["Bob", "Printer"],
                                   "context": "ops log"})
    assert answer.status_code == 200, answer.text
    detail = http.get(url).json()
    assert detail["occurred_start"].startswith("2024-03-01T10:00:00")
    assert sorted(detail["entities"]) == ["Bob", "Printer"] and detail["context"] == "ops log"

    invalid = http.patch(url, json={"state": "invalidated", "reason": "wrong printer"}).json()
    assert invalid["success"]
    detail = http.get(url).json()
    assert detail["state"] == "invalidated" and detail["invalidation_reason"] == "wrong printer"
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "printer"}).json()
    assert all(r["id"] != fact["id"] for r in recalled["results"]), "an invalidated memory is not recalled"

    for body, field in (({"fact_type": "opinion"}, "fact_type"), ({"text": "  "}, "text"),
                        ({"state": "gone"}, "state"), ({"mentioned_at": "not a date"}, "mentioned_at")):
        bad = http.patch(url, json=body)
        assert bad.status_code == 400 and bad.json()["field"] == field, (body, bad.text)
    assert http.patch(f"/v1/default/banks/{bank_id}/memories/00000000-0000-0000-0000-000000000000",
                      json={"text": "x"}).status_code == 404
    assert http.patch(f"/v1/default/banks/{bank_id}/documents/nope", json={"tags": []}).status_code == 404


def test_reprocess_extracts_the_stored_text_again(http: httpx.Client, bank_id: str) -> None:
    _retain(http, bank_id, "Carol joined the support team. She answers tickets in Spanish.",
            document_id="doc-r", tags=["t"], context="hr")
    first = {f["id"] for f in _facts(http, bank_id)}
    answer = http.post(f"/v1/default/banks/{bank_id}/documents/doc-r/reprocess")
    assert answer.status_code == 200, answer.text
    operation_id = answer.json()["operation_id"]
    status = wait_for(lambda: (s := http.get(f"/v1/default/banks/{bank_id}/operations/{operation_id}").json())
                      ["status"] in ("completed", "failed") and s, "the reprocess operation")
    assert status["status"] == "completed", status
    again = _facts(http, bank_id)
    assert len(again) == len(first) and not first & {f["id"] for f in again}, "every chunk was extracted again"
    assert all(f["tags"] == ["t"] and f["context"] == "hr" for f in again), "with the document's own parameters"
    events = http.get(f"/v1/default/banks/{bank_id}/documents/doc-r/history").json()["items"]
    assert events[0]["kind"] == "reprocess" and events[0]["operation_id"] == operation_id
    assert events[0]["facts_removed"] == len(first) and events[0]["facts_added"] == len(again)
    assert http.post(f"/v1/default/banks/{bank_id}/documents/none/reprocess").status_code == 404


def test_dry_run_extract_stores_nothing(http: httpx.Client, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    text = "Dana bought a red bicycle. She rides it to work in Munich."
    answer = http.post(f"/v1/default/banks/{bank_id}/memories/dry-run-extract",
                       json={"content": [{"type": "text", "text": text},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": "iVBORw0KGgo="}}],
                             "retain_chunk_size": 35})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["chunks"]) == 2, "the request's chunk size is used"
    assert sum(c["fact_count"] for c in body["chunks"]) == len(body["facts"]) >= 2
    assert {f["chunk_index"] for f in body["facts"]} == {0, 1}
    assert any("bicycle" in f["text"] for f in body["facts"])
    assert body["facts"][0]["attachments"] == [{"block_index": 1, "type": "image", "media_type": "image/png"}]
    assert http.get(f"/v1/default/banks/{bank_id}/memories/list").json()["total"] == 0
    assert http.get(f"/v1/default/banks/{bank_id}/documents").json()["total"] == 0


def test_retag_with_the_same_tags_keeps_the_observations(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    Script(llm).decide = _observe_each_fact
    _retain(llm_http, bank_id, BERLIN, document_id="doc-s", tags=["team:a"])
    (before,) = observations(llm_http, bank_id)
    answer = llm_http.patch(f"/v1/default/banks/{bank_id}/documents/doc-s", json={"tags": ["team:a"]}).json()
    assert answer["facts_updated"] == 0 and answer["observations_removed"] == 0
    settle(llm_http, bank_id)
    assert [o["id"] for o in observations(llm_http, bank_id)] == [before["id"]], "nothing to rebuild"
    kinds = [e["kind"] for e in llm_http.get(f"/v1/default/banks/{bank_id}/documents/doc-s/history").json()["items"]]
    assert kinds == ["retain"]


def test_memory_tags_and_metadata_move_its_observation_to_the_new_scope(
    llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    Script(llm).decide = _observe_each_fact
    _retain(llm_http, bank_id, BERLIN, document_id="doc-m", tags=["team:a"])
    (fact,) = _facts(llm_http, bank_id)
    (before,) = observations(llm_http, bank_id)
    answer = llm_http.patch(f"/v1/default/banks/{bank_id}/memories/{fact['id']}",
                            json={"tags": ["team:b"], "metadata": {"source": "hr"}})
    assert answer.status_code == 200, answer.text
    settle(llm_http, bank_id)
    detail = llm_http.get(f"/v1/default/banks/{bank_id}/memories/{fact['id']}").json()
    assert detail["tags"] == ["team:b"] and detail["metadata"] == {"source": "hr"}
    (after,) = observations(llm_http, bank_id)
    assert after["id"] != before["id"] and after["tags"] == ["team:b"], "rebuilt in the new scope"
    bad = llm_http.patch(f"/v1/default/banks/{bank_id}/memories/{fact['id']}", json={"tags": [" "]})
    assert bad.status_code == 400 and bad.json()["field"] == "tags[0]"
