"""A retain reads what it needs to resolve its facts' entities while the embedder works, before it
stores the facts (its connection would otherwise sit idle until the vectors come in), and does what
locks (name locks, entity rows, co-occurrence counts, mention rows) only after the facts: entity rows
locked before the facts' insert were held that much longer, and eight clients retaining into one bank
whose facts all named "User" went from ~70 to ~62 retains/s. The statements' order is read from
PostgreSQL's command ids: each row keeps the number (`cmin`) of the statement of its transaction that
wrote it."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import asyncpg
import pytest

from engram import Memory
from tests.conftest import RunningServer, scripted_server
from tests.support.scripted_llm import ChatRequest, ScriptedLLM

NAMES = ["Ada Lovelace", "Charles Babbage"]
READ_EARLY = "while they are embedded"


@pytest.fixture(scope="module")
def order_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    """The scripted LLM's server on a database of its own, with nothing after a retain that would
    rewrite its entities (observations, consolidation)."""
    with scripted_server(pg_dsn, scripted_llm, "retain-write-order",
                         HINDSIGHT_API_ENABLE_AUTO_CONSOLIDATION="false",
                         HINDSIGHT_API_ENABLE_OBSERVATIONS="false") as running:
        yield running


def one_fact_naming_both(request: ChatRequest) -> dict:
    """Each item "Ada Lovelace met Charles Babbage on day N." is one fact naming both."""
    day = re.search(r"on day (\d+)", request.user_text).group(1)
    return {"facts": [{"what": f"{NAMES[0]} met {NAMES[1]} on day {day}", "fact_type": "world", "entities": NAMES}]}


async def written_rows(dsn: str, bank_id: str) -> dict[str, list[asyncpg.Record]]:
    conn = await asyncpg.connect(dsn)
    try:
        return {
            "facts": await conn.fetch("SELECT id, cmin::text::int AS written, xmin::text AS tx FROM memory_units"
                                      " WHERE bank_id = $1", bank_id),
            "entities": await conn.fetch("SELECT canonical_name, mention_count, cmin::text::int AS written,"
                                         " xmin::text AS tx FROM entities WHERE bank_id = $1", bank_id),
            "mentions": await conn.fetch("SELECT unit_id, cmin::text::int AS written, xmin::text AS tx"
                                         " FROM unit_entities WHERE bank_id = $1", bank_id),
            "pairs": await conn.fetch("SELECT c.count, c.cmin::text::int AS written FROM entity_cooccurrences c"
                                      " JOIN entities e ON e.id = c.entity_a WHERE e.bank_id = $1", bank_id),
        }
    finally:
        await conn.close()


# 1 item: a sync retain's path; 60: a bulk retain's (50 facts or more), whose semantic links are
# searched beside the transaction. The second retain names the same two entities again: it touches
# and counts existing rows instead of creating them.
@pytest.mark.parametrize("items", [1, 60])
async def test_entity_rows_and_counts_are_written_after_the_facts(
    order_server: tuple[RunningServer, str], llm: ScriptedLLM, bank_id: str, items: int
) -> None:
    server, dsn = order_server
    llm.handler = one_fact_naming_both
    with server.client() as http:
        for first in (0, items):
            response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
                {"content": f"{NAMES[0]} met {NAMES[1]} on day {day}."} for day in range(first, first + items)]})
            assert response.status_code == 200, response.text
            rows = await written_rows(dsn, bank_id)
            assert {e["canonical_name"]: e["mention_count"] for e in rows["entities"]} == dict.fromkeys(
                NAMES, first + items)
            assert len(rows["mentions"]) == 2 * (first + items) and [p["count"] for p in rows["pairs"]] == [
                first + items]
            last_retain = max({f["tx"] for f in rows["facts"]}, key=int)
            facts = [f for f in rows["facts"] if f["tx"] == last_retain]
            assert len(facts) == items
            assert {e["tx"] for e in rows["entities"]} == {last_retain}, "created or counted by this retain"
            last_fact = max(f["written"] for f in facts)
            assert min(e["written"] for e in rows["entities"]) > last_fact, (rows["entities"], last_fact)
            assert max(p["written"] for p in rows["pairs"]) > last_fact
            assert min(m["written"] for m in rows["mentions"] if m["tx"] == last_retain) > last_fact


async def test_with_an_llm_the_entities_are_read_before_the_facts_are_stored_unless_labels_need_vectors(
    isolated_dsn: str, caplog: pytest.LogCaptureFixture, scripted_llm: ScriptedLLM,
) -> None:
    """With no LLM, a bank's labels are classified from the facts' vectors, so nothing about their
    entities is known before the vectors are in."""
    scripted_llm.reset()
    scripted_llm.handler = one_fact_naming_both
    caplog.set_level(logging.DEBUG, logger="engram.retain")
    settings = scripted_llm.settings()
    memory = Memory(database_url=isolated_dsn, llm_provider=settings.llm_provider, llm_base_url=settings.llm_base_url,
                    llm_api_key=settings.llm_api_key, llm_model=settings.llm_model, llm_timeout=5.0, llm_max_retries=0)
    try:
        memory.retain("early", f"{NAMES[0]} met {NAMES[1]} on day 1.")
    finally:
        memory.close()
        scripted_llm.reset()
    assert [r.getMessage() for r in caplog.records if READ_EARLY in r.getMessage()] == [
        f"read the entities of 1 facts {READ_EARLY}"]
    caplog.clear()
    labels = [{"key": "topic", "type": "value", "values": [{"value": "computing", "description": "machines"}]}]
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id, config) VALUES ('labelled', $1::jsonb)",
                           json.dumps({"entity_labels": labels}))
    finally:
        await conn.close()
    offline = Memory(database_url=isolated_dsn)
    try:
        offline.retain("labelled", f"{NAMES[0]} met {NAMES[1]} on day 2.")
    finally:
        offline.close()
    assert not [r for r in caplog.records if READ_EARLY in r.getMessage()]
