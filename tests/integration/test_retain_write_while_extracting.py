"""An offline retain of new documents opens its transaction at once and stores the first facts while
the rest are extracted and embedded (retain/pipeline.py, `retain_items`); a retain that replaces a
stored document, or extracts with an LLM, opens it only once every fact is extracted. Either way
the stored documents, facts and history are the same."""

from __future__ import annotations

import logging

import pytest

from engram import Memory
from tests.support.database import query
from tests.support.scripted_llm import ScriptedLLM

EARLY = "while their facts are extracted"


def items(first: int, count: int) -> list[dict[str, str]]:
    return [{"content": f"Parcel {n} left the depot in Leeds. It reached York on Friday.", "document_id": f"doc-{n}"}
            for n in range(first, first + count)]


def early_writes(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for record in caplog.records if EARLY in record.getMessage())


def fact_count(dsn: str, bank: str) -> int:
    return query(dsn, "SELECT count(*) FROM memory_units WHERE bank_id = $1", bank)[0][0]


def history(dsn: str, bank: str) -> dict[str, list[tuple[str, int, int]]]:
    rows = query(dsn, "SELECT document_id, kind, facts_added, facts_removed FROM document_events"
                      " WHERE bank_id = $1 ORDER BY document_id, id", bank)
    events: dict[str, list[tuple[str, int, int]]] = {}
    for row in rows:
        events.setdefault(row["document_id"], []).append((row["kind"], row["facts_added"], row["facts_removed"]))
    return events


async def test_new_documents_are_written_while_extracted_and_stored_whole(
    isolated_dsn: str, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="engram.retain")
    memory = Memory(database_url=isolated_dsn)
    try:
        memory.retain_batch("early", items(0, 60))
        assert early_writes(caplog) == 1
        caplog.clear()
        memory.retain_batch("early", [{"content": "Parcel 0 came back to Leeds. It was torn.", "document_id": "doc-0"}])
        # replaced doc-0: waited for its extraction
        assert early_writes(caplog) == 0
    finally:
        memory.close()
    assert fact_count(isolated_dsn, "early") == 120, "two facts an item"
    events = history(isolated_dsn, "early")
    assert len(events) == 60
    assert all(events[f"doc-{n}"][0] == ("retain", 2, 0) for n in range(60)), "each new document's facts counted"
    assert events["doc-0"][1][1:] == (2, 2), "the replaced document: two facts out, two in"


async def test_a_retain_with_an_llm_extracts_before_it_opens_its_transaction(
    isolated_dsn: str, caplog: pytest.LogCaptureFixture, scripted_llm: ScriptedLLM,
) -> None:
    scripted_llm.reset()
    scripted_llm.enqueue(*[{"facts": [{"what": f"Parcel {n} left Leeds", "fact_type": "world"}]} for n in range(3)])
    caplog.set_level(logging.DEBUG, logger="engram.retain")
    settings = scripted_llm.settings()
    memory = Memory(database_url=isolated_dsn, llm_provider=settings.llm_provider, llm_base_url=settings.llm_base_url,
                    llm_api_key=settings.llm_api_key, llm_model=settings.llm_model, llm_timeout=5.0, llm_max_retries=0)
    try:
        memory.retain_batch("llm", items(0, 3))
    finally:
        memory.close()
    assert early_writes(caplog) == 0
    assert {events[0] for events in history(isolated_dsn, "llm").values()} == {("retain", 1, 0)}
