"""New documents are written in one statement (`retain/fresh_documents.py`): what that
stores, in a batch or alone, is every field the one-by-one path stores (the expectations below are
what it stored before this path existed), and a batch that names a stored document still replaces
that document."""

from __future__ import annotations

import hashlib

import httpx

ITEMS = [
    {"content": "Ana repaired the old bicycle in March.", "document_id": "doc-a", "tags": ["garage", "ana"],
     "metadata": {"source": "notes"}, "context": "workshop log", "timestamp": "2024-03-02T10:00:00Z"},
    {"content": "Ben painted the fence green. Caro helped him.", "document_id": "doc-b",
     "observation_scopes": [["garden"]], "timestamp": "2024-05-01T12:00:00Z"},
    {"content": "Dev bought a kettle.", "document_id": "doc-c", "tags": ["kitchen"],
     "timestamp": "2023-11-20T08:30:00Z"},
]
TIMESTAMPS = ("created_at", "updated_at")


def retain(http: httpx.Client, bank_id: str, items: list[dict]) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


def stored(http: httpx.Client, bank_id: str, document_id: str) -> dict:
    """What the API shows of a document, its chunks and its history, minus what differs by nature
    (times, generated chunk ids)."""
    base = f"/v1/default/banks/{bank_id}/documents/{document_id}"
    document = {k: v for k, v in http.get(base).json().items() if k not in TIMESTAMPS and k != "bank_id"}
    chunks = [{k: v for k, v in c.items() if k not in ("chunk_id", "id", "document_id", "bank_id", *TIMESTAMPS)}
              for c in http.get(f"{base}/chunks").json()["items"]]
    history = [{k: v for k, v in e.items() if k in ("kind", "facts_added", "facts_removed")}
               for e in http.get(f"{base}/history").json()["items"]]
    facts = sorted(f["text"] for f in http.get(f"/v1/default/banks/{bank_id}/memories/list",
                                               params={"document_id": document_id}).json()["items"])
    return {"document": document, "chunks": chunks, "history": history, "facts": facts}


def expected_document(item: dict, facts: int) -> dict:
    return {
        "id": item["document_id"], "original_text": item["content"],
        "content_hash": hashlib.sha256(item["content"].encode()).hexdigest(),
        "memory_unit_count": facts, "nodes_by_fact_type": {"world": facts}, "tags": item.get("tags", []),
        "document_metadata": item.get("metadata"), "observation_scopes": item.get("observation_scopes"),
        "retain_params": {"context": item.get("context"), "update_mode": "replace",
                          "timestamp": item["timestamp"].replace("Z", "+00:00")},
        "attachments": [],
    }


def test_new_documents_are_stored_whole_in_a_batch_and_alone(http: httpx.Client, bank_id: str) -> None:
    together, apart = bank_id, f"{bank_id}-apart"
    retain(http, together, ITEMS)
    for item in ITEMS:
        retain(http, apart, [item])
    for item in ITEMS:
        mine, theirs = stored(http, together, item["document_id"]), stored(http, apart, item["document_id"])
        facts = len(mine["facts"])
        assert facts == item["content"].count(".")
        assert mine["document"] == expected_document(item, facts)
        assert mine["chunks"] == [{"chunk_index": 0, "chunk_text": item["content"], "attachments": []}]
        assert mine["history"] == [{"kind": "retain", "facts_added": facts, "facts_removed": 0}]
        assert mine == theirs, item["document_id"]


def test_a_batch_naming_a_stored_document_replaces_it(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, [{"content": "Ana sold the red car.", "document_id": "doc-a"}])
    retain(http, bank_id, [{"content": "Ana bought a blue van.", "document_id": "doc-a"},
                           {"content": "Ben adopted a cat.", "document_id": "doc-b"}])
    replaced = stored(http, bank_id, "doc-a")
    assert replaced["facts"] == ["Ana bought a blue van."]
    assert [e["facts_removed"] for e in replaced["history"]] == [1, 0]  # newest first
    assert stored(http, bank_id, "doc-b")["facts"] == ["Ben adopted a cat."]
