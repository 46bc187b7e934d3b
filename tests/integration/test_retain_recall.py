"""Retain and recall with no LLM configured: sentence facts, documents with replace semantics,
timeless content, tag filters in every mode, types, budgets and bad input."""

from __future__ import annotations

import uuid

import httpx
import pytest


def retain(http: httpx.Client, bank_id: str, *items: dict, **extra: object) -> dict:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": list(items), **extra})
    assert response.status_code == 200, response.text
    return response.json()


def recall(http: httpx.Client, bank_id: str, query: str, **options: object) -> list[dict]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query, **options})
    assert response.status_code == 200, response.text
    return response.json()["results"]


def memories(http: httpx.Client, bank_id: str, **params: object) -> list[dict]:
    response = http.get(f"/v1/default/banks/{bank_id}/memories/list", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_retained_sentences_are_recalled_by_meaning(http: httpx.Client, bank_id: str) -> None:
    body = retain(
        http,
        bank_id,
        {
            "content": "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.\n"
            "Melanie: That's great! I painted a sunrise over the lake with my kids last weekend.",
            "timestamp": "2023-05-08T13:56:00Z",
            "context": "chat between friends",
            "metadata": {"session": "1"},
        },
    )
    assert body == {"success": True, "bank_id": bank_id, "items_count": 1, "async": False,
                    "operation_id": None, "operation_ids": None, "usage": body["usage"]}

    results = recall(http, bank_id, "What did Melanie paint?")
    assert "sunrise" in results[0]["text"]
    assert results[0]["context"] == "chat between friends"
    assert results[0]["metadata"] == {"session": "1"}
    assert "Melanie" in results[0]["entities"]

    assert {uuid.UUID(m["id"]).version for m in memories(http, bank_id)} == {7}, "facts get time-ordered ids"
    support = next(m for m in memories(http, bank_id) if "support group" in m["text"])
    assert support["occurred_start"].startswith("2023-05-07"), "'yesterday' resolves against the timestamp"
    assert support["mentioned_at"].startswith("2023-05-08")


def test_retaining_a_document_again_replaces_its_facts(http: httpx.Client, bank_id: str) -> None:
    first = "The office moved to Berlin in March.\n\nThe team uses Python for every service."
    retain(http, bank_id, {"content": first, "document_id": "handbook"})
    chunks_before = http.get(f"/v1/default/banks/{bank_id}/documents/handbook/chunks").json()["items"]

    retain(http, bank_id, {"content": "The office moved to Lisbon in June.", "document_id": "handbook"})
    texts = [m["text"] for m in memories(http, bank_id)]
    assert any("Lisbon" in t for t in texts)
    assert not any("Berlin" in t for t in texts), "the old version's facts are gone"
    document = http.get(f"/v1/default/banks/{bank_id}/documents/handbook").json()
    assert document["original_text"] == "The office moved to Lisbon in June."
    assert document["memory_unit_count"] == len(texts)
    assert chunks_before, "the first version had chunks"


def test_unchanged_chunks_are_kept_when_a_document_is_retained_again(http: httpx.Client, bank_id: str) -> None:
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"retain_chunk_size": 60}})
    part_one = "Alice joined Acme as a designer in 2021."
    part_two = "Bob leads the data team at Acme."
    retain(http, bank_id, {"content": f"{part_one}\n\n{part_two}", "document_id": "people"})
    before = {c["chunk_text"]: c["chunk_id"] for c in
              http.get(f"/v1/default/banks/{bank_id}/documents/people/chunks").json()["items"]}
    alice_fact = next(m for m in memories(http, bank_id) if "Alice" in m["text"])

    retain(http, bank_id, {"content": f"{part_one}\n\nCarol now leads the data team.", "document_id": "people"})
    after = {c["chunk_text"]: c["chunk_id"] for c in
             http.get(f"/v1/default/banks/{bank_id}/documents/people/chunks").json()["items"]}
    assert after[part_one] == before[part_one], "the unchanged chunk is reused, not re-extracted"
    ids = {m["id"] for m in memories(http, bank_id)}
    assert alice_fact["id"] in ids
    assert not any("Bob" in m["text"] for m in memories(http, bank_id))


def test_append_mode_keeps_earlier_content(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": "Day one: we planned the launch.", "document_id": "log"})
    retain(http, bank_id, {"content": "Day two: we shipped the launch.", "document_id": "log", "update_mode": "append"})
    texts = " ".join(m["text"] for m in memories(http, bank_id))
    assert "planned" in texts and "shipped" in texts
    assert "Day one" in http.get(f"/v1/default/banks/{bank_id}/documents/log").json()["original_text"]


def test_unset_timestamp_stores_timeless_facts(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": "Water boils at 100 degrees Celsius at sea level.", "timestamp": "unset"})
    (fact,) = memories(http, bank_id)
    assert fact["mentioned_at"] is None


TAGGED = [
    ("alpha only", ["alpha"]),
    ("alpha and beta", ["alpha", "beta"]),
    ("beta only", ["beta"]),
    ("untagged note", []),
]


@pytest.fixture
def tagged_bank(http: httpx.Client, bank_id: str) -> str:
    for text, tags in TAGGED:
        retain(http, bank_id, {"content": f"The project note says {text}.", "tags": tags})
    return bank_id


@pytest.mark.parametrize(
    ("tags", "mode", "expected"),
    [
        (["alpha"], "any", {"alpha only", "alpha and beta", "untagged note"}),
        (["alpha", "beta"], "all", {"alpha and beta", "untagged note"}),
        (["alpha"], "any_strict", {"alpha only", "alpha and beta"}),
        (["alpha", "beta"], "all_strict", {"alpha and beta"}),
        (["beta", "alpha"], "exact", {"alpha and beta"}),
        (["alpha"], "exact", {"alpha only"}),
        ([], "exact", {"untagged note"}),
        ([], "any", {"alpha only", "alpha and beta", "beta only", "untagged note"}),
    ],
)
def test_tag_match_modes(http: httpx.Client, tagged_bank: str, tags: list[str], mode: str, expected: set[str]) -> None:
    results = recall(http, tagged_bank, "project note", tags=tags, tags_match=mode)
    found = {label for label, _ in TAGGED if any(label in r["text"] for r in results)}
    assert found == expected


def test_tag_groups_combine_filters(http: httpx.Client, tagged_bank: str) -> None:
    groups = [{"tags": ["alpha"], "match": "any_strict"}, {"not": {"tags": ["beta"], "match": "any_strict"}}]
    results = recall(http, tagged_bank, "project note", tag_groups=groups)
    assert [r for r in results if "alpha only" in r["text"]]
    assert all("beta" not in r["text"] for r in results)


def test_types_and_max_tokens_limit_results(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": " ".join(f"Fact number {n} is about gardening and tomatoes." for n in range(30))})
    everything = recall(http, bank_id, "gardening tomatoes", max_tokens=4096)
    small = recall(http, bank_id, "gardening tomatoes", max_tokens=40)
    assert len(everything) >= 20
    assert 0 < len(small) < len(everything)
    assert recall(http, bank_id, "gardening tomatoes", types=["experience"]) == []


def test_recall_trace_shows_each_arm(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": "Priya adopted a greyhound named Comet in June 2023.",
                           "timestamp": "2023-07-01T10:00:00Z"})
    response = http.post(
        f"/v1/default/banks/{bank_id}/memories/recall",
        json={"query": "What dog did Priya adopt in June 2023?", "trace": True, "query_timestamp": "2023-08-01T00:00:00Z"},
    ).json()
    trace = response["trace"]
    assert {"semantic", "keyword", "temporal"} <= set(trace["arms"])
    assert trace["temporal_window"]["start"].startswith("2023-06-01")
    assert trace["results"][0]["ranks"]["semantic"] == 1
    assert response["results"][0]["scores"]["final"] > 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"items": []}, "items"),
        ({"items": [{"content": "   "}]}, "items[0].content"),
        ({"items": [{"content": "x", "timestamp": "not a date"}]}, "items[0].timestamp"),
    ],
)
def test_bad_retain_input_names_the_field(http: httpx.Client, bank_id: str, body: dict, field: str) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json=body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert http.get(f"/v1/default/banks/{bank_id}/config").status_code == 404, "nothing was written"


def test_schema_errors_answer_422_with_the_location(http: httpx.Client, bank_id: str) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "x", "budget": "huge"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "budget"


def test_clearing_a_bank_removes_memories_documents_and_entities(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": "Alice met Bob in Paris.", "document_id": "d1", "tags": ["trip"]})
    assert http.get(f"/v1/default/banks/{bank_id}/tags").json()["items"] == [{"tag": "trip", "count": 1}]
    cleared = http.delete(f"/v1/default/banks/{bank_id}/memories").json()
    assert cleared["success"] and cleared["deleted_count"] >= 1
    assert memories(http, bank_id) == []
    assert http.get(f"/v1/default/banks/{bank_id}/documents").json()["items"] == []


def test_deleting_a_document_deletes_its_facts(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, {"content": "Keep this fact about Rome.", "document_id": "keep"})
    retain(http, bank_id, {"content": "Drop this fact about Oslo.", "document_id": "drop"})
    deleted = http.delete(f"/v1/default/banks/{bank_id}/documents/drop").json()
    assert deleted["memory_units_deleted"] == 1
    assert [m["document_id"] for m in memories(http, bank_id)] == ["keep"]
    assert http.get(f"/v1/default/banks/{bank_id}/documents/drop").status_code == 404
