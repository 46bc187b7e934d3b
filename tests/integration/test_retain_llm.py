"""Retain through an LLM (the scripted OpenAI-compatible endpoint): the extraction request carries the
schema and the item's date, facts are stored with their types, dates, entities and causal links,
and a failing LLM never leaves half a retain behind."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM

EXTRACTED = {
    "facts": [
        {
            "what": "The user's flight to Tokyo was cancelled",
            "when": "on 3 March 2024",
            "who": ["user"],
            "fact_type": "world",
            "fact_kind": "event",
            "occurred_start": "2024-03-03T00:00:00Z",
            "entities": ["user", "Tokyo"],
        },
        {
            "what": "The assistant rebooked the user on a flight with Japan Airlines",
            "why": "because the original flight was cancelled",
            "fact_type": "assistant",
            "fact_kind": "event",
            "entities": ["user", "Japan Airlines"],
            "causal_relations": [{"caused_by": 0}],
        },
    ]
}


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


def test_llm_facts_are_stored_with_types_entities_and_causes(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = lambda request: EXTRACTED if request.schema_name == "ExtractionOutput" else Reply.error(400)
    response = http.post(
        f"/v1/default/banks/{bank_id}/memories",
        json={"items": [{"content": "user: my Tokyo flight got cancelled!\nassistant: I rebooked you on JAL.",
                         "timestamp": "2024-03-03T09:00:00Z", "tags": ["trip"]}]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["total_tokens"] > 0

    # The last extraction request: a background consolidation may have called the LLM since.
    request = next(r for r in reversed(llm.requests) if r.schema_name == "ExtractionOutput")
    assert "2024-03-03" in request.user_text, "the extraction prompt carries when the text was said"
    assert request.schema_name == "ExtractionOutput"

    items = http.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]
    by_type = {m["fact_type"]: m for m in items}
    assert set(by_type) == {"world", "experience"}, "assistant facts are stored as experience"
    assert by_type["world"]["text"].startswith("The user's flight to Tokyo was cancelled | When: on 3 March 2024")
    assert by_type["world"]["occurred_start"].startswith("2024-03-03")
    assert "Japan Airlines" in by_type["experience"]["entities"]
    assert by_type["experience"]["tags"] == ["trip"]

    stats = http.get(f"/v1/default/banks/{bank_id}/stats").json()
    assert stats["links_by_link_type"].get("causal") == 1


def test_new_documents_are_written_with_their_history_once_their_facts_are_extracted(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """Through an LLM every fact is extracted before the transaction opens: a new document's row, its
    chunk and its history event (with the facts it added, counted by the retain) go in one statement
    (`fresh_documents.write_fresh_documents`), and the event is not written again after the facts."""
    llm.handler = lambda request: EXTRACTED if request.schema_name == "ExtractionOutput" else Reply.error(400)
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "user: my Tokyo flight got cancelled!", "document_id": "trip-log"},
        {"content": "assistant: I rebooked you on JAL.", "document_id": "trip-log-2"},
    ]})
    assert response.status_code == 200, response.text
    for document_id in ("trip-log", "trip-log-2"):
        base = f"/v1/default/banks/{bank_id}/documents/{document_id}"
        history = [{k: e[k] for k in ("kind", "facts_added", "facts_removed")}
                   for e in http.get(f"{base}/history").json()["items"]]
        assert history == [{"kind": "retain", "facts_added": 2, "facts_removed": 0}], document_id
        assert [c["chunk_text"] for c in http.get(f"{base}/chunks").json()["items"]] == [
            http.get(base).json()["original_text"]]


def test_a_failing_llm_fails_the_retain_and_writes_nothing(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = lambda request: Reply.error(500, "upstream exploded")
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Remember this."}]})
    assert response.status_code == 502
    assert "500" in response.json()["detail"]
    assert http.get(f"/v1/default/banks/{bank_id}/memories/list").status_code == 404, "no bank, no facts"


def test_llm_garbage_is_retried_then_reported(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = lambda request: Reply.text("I'm sorry, I cannot produce JSON today.")
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Remember this."}]})
    assert response.status_code == 502
    assert "ExtractionOutput" in response.json()["detail"]
    assert len(llm.requests) == 3, "structured output is retried with the validation error, three attempts"
