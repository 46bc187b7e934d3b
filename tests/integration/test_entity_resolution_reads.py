"""What entity resolution reads in a retain's transaction. A name no entity claims is locked and
resolved again (`retain.entities.store_entities`) so that two retains of one new name converge; the
second resolution re-reads exact namesakes only, not the trigram-similar names the first one searched
a moment before (the bank's costliest read of a small retain, ~1.3 ms: it ran twice for each new name)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.retain.entities import Mention, store_entities
from engram.store.migrate import apply_migrations

EMBEDDING = "[" + ",".join(["0.1"] * 384) + "]"
BANK = "cast"
# What only the trigram search of `store.entities.trigram_candidates` sends.
TRIGRAM_SEARCH = "similarity(lower(e.canonical_name)"


@pytest.fixture
async def bank_dsn(isolated_dsn: str) -> AsyncIterator[str]:
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await apply_migrations(conn)
        await conn.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", BANK)
        # A similar name that the new ones below do not resolve to: the search has something to read.
        await conn.execute(
            "INSERT INTO entities (id, bank_id, canonical_name, entity_kind, first_seen, last_seen)"
            " VALUES (gen_random_uuid(), $1, 'Marisa Quintana', 'free', now(), now())", BANK)
    finally:
        await conn.close()
    yield isolated_dsn


async def new_fact(conn: asyncpg.Connection) -> uuid.UUID:
    return await conn.fetchval(
        "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding)"
        " VALUES (gen_random_uuid(), $1, 'Marisol Quintero sold nets at the harbour.', 'world', $2::vector)"
        " RETURNING id", BANK, EMBEDDING)


async def test_a_new_name_is_searched_among_similar_names_once_and_still_converges(bank_dsn: str) -> None:
    """Two transactions store the same new name at once. Each searches the similar names once; the
    second waits on the first's name lock, then finds the first's entity by its exact name."""
    first, second = await asyncpg.connect(bank_dsn), await asyncpg.connect(bank_dsn)
    searches = {first: 0, second: 0}
    for conn in (first, second):
        conn.add_query_logger(lambda logged, conn=conn: searches.__setitem__(
            conn, searches[conn] + (TRIGRAM_SEARCH in logged.query)))
    try:
        for conn in (first, second):
            await conn.execute("BEGIN")
        mention = ["Marisol Quintero", "Harbour Guild"]
        await store_entities(first, BANK, [Mention(await new_fact(first), mention)])
        late = asyncio.ensure_future(store_entities(second, BANK, [Mention(await new_fact(second), mention)]))
        await asyncio.sleep(0.5)
        assert not late.done(), "the second waits for the first's lock on the new names"
        await first.execute("COMMIT")
        await asyncio.wait_for(late, 10)
        await second.execute("COMMIT")
        assert searches == {first: 1, second: 1}, "one trigram search per retain, not one per resolution"
        names = await first.fetch(
            "SELECT canonical_name, mention_count FROM entities WHERE bank_id = $1 ORDER BY 1", BANK)
        assert [(r["canonical_name"], r["mention_count"]) for r in names] == [
            ("Harbour Guild", 2), ("Marisa Quintana", 0), ("Marisol Quintero", 2)]
    finally:
        await first.close()
        await second.close()
