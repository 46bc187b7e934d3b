"""A retain of several new documents writes them together (`retain/fresh_documents.py`): what it stores
must be what retaining them one by one stores, and a batch that names a stored document still
replaces that document."""

from __future__ import annotations

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


def test_a_batch_of_new_documents_is_stored_as_one_by_one(http: httpx.Client, bank_id: str) -> None:
    together, apart = bank_id, f"{bank_id}-apart"
    retain(http, together, ITEMS)
    for item in ITEMS:
        retain(http, apart, [item])
    for item in ITEMS:
        mine, theirs = stored(http, together, item["document_id"]), stored(http, apart, item["document_id"])
        assert mine["facts"], mine
        assert mine["document"]["tags"] == item.get("tags", [])
        for part in ("document", "chunks", "history", "facts"):
            assert mine[part] == theirs[part], (item["document_id"], part)


def test_a_batch_naming_a_stored_document_replaces_it(http: httpx.Client, bank_id: str) -> None:
    retain(http, bank_id, [{"content": "Ana sold the red car.", "document_id": "doc-a"}])
    retain(http, bank_id, [{"content": "Ana bought a blue van.", "document_id": "doc-a"},
                           {"content": "Ben adopted a cat.", "document_id": "doc-b"}])
    replaced = stored(http, bank_id, "doc-a")
    assert replaced["facts"] == ["Ana bought a blue van."]
    assert [e["facts_removed"] for e in replaced["history"]] == [1, 0]  # newest first
    assert stored(http, bank_id, "doc-b")["facts"] == ["Ben adopted a cat."]
