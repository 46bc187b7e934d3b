"""A document whose id the server makes for a retain (the caller named none) cannot hold anything
yet: the retain neither looks up what is stored under it nor locks it
(`PreparedItem.document_id_made_here`), while a document the caller names is still looked up and
locked. (A queued retain names its documents after its operation, so that a re-run replaces them:
those are looked up, which `test_topology.py`'s killed worker checks.)"""

from __future__ import annotations

from typing import Any

from engram.retain import fresh_documents
from engram.store import facts_write as fw


async def test_only_the_documents_a_caller_named_are_looked_up_and_locked(isolated_dsn: str, monkeypatch) -> None:
    from engram import Memory

    asked: list[tuple[str, list[str]]] = []
    real_lookup, real_lock = fw.existing_chunks_of, fresh_documents.lock_documents

    async def lookup(conn: Any, bank_id: str, document_ids: list[str]) -> Any:
        asked.append(("looked up", list(document_ids)))
        return await real_lookup(conn, bank_id, document_ids)

    async def lock(conn: Any, bank_id: str, document_ids: list[str]) -> Any:
        asked.append(("locked", list(document_ids)))
        return await real_lock(conn, bank_id, document_ids)

    monkeypatch.setattr(fw, "existing_chunks_of", lookup)
    monkeypatch.setattr(fresh_documents, "lock_documents", lock)
    with Memory(database_url=isolated_dsn) as memory:
        await memory.aretain_batch("made-ids", [
            {"content": "The harbour crane was repainted orange."},
            {"content": "The ferry timetable changed in May.", "document_id": "timetable"},
            {"content": "A storm closed the pier for two days."},
        ])
        assert asked == [("looked up", ["timetable"]), ("locked", ["timetable"])]

        asked.clear()
        await memory.aretain("made-ids", "The lighthouse keeper retired.")
        assert asked == [], "a retain of one unnamed item reads and locks nothing for its document"

        asked.clear()  # the named document again: found, and replaced as before
        await memory.aretain("made-ids", "The ferry timetable changed again in June.", document_id="timetable")
        assert asked[0] == ("looked up", ["timetable"])
        listed = await memory._arun(_documents(memory, "made-ids"))
        assert len(listed) == 4 and "timetable" in listed


async def _documents(memory: Any, bank_id: str) -> list[str]:
    services = await memory._open()
    rows = await services.pool.fetch("SELECT id FROM documents WHERE bank_id = $1", bank_id)
    return [row["id"] for row in rows]
