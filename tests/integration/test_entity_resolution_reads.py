"""What entity resolution reads in a retain's transaction. A name no entity claims is locked and
resolved again (`retain.entities.store_entities`) so that two retains of one new name converge; the
second resolution re-reads exact namesakes only, not the trigram-similar names the first one searched
a moment before (the costliest read of a small retain: it ran twice for each new name). And that
search goes through the names' GiST index even when PostgreSQL's statistics know nothing of the bank
(migration 032), instead of reading and sorting all of the bank's entities."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.retain.entities import Mention, store_entities
from engram.store.entities import trigram_candidates
from engram.store.migrate import apply_migrations

EMBEDDING = "[" + ",".join(["0.1"] * 384) + "]"
BANK = "cast"
# What only the trigram search of `store.entities.trigram_candidates` sends.
TRIGRAM_SEARCH = "similar_free_entities("


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


async def insert_entities(conn: asyncpg.Connection, bank_id: str, names: list[str]) -> None:
    await conn.execute(
        "INSERT INTO entities (id, bank_id, canonical_name, entity_kind, first_seen, last_seen)"
        " SELECT gen_random_uuid(), $1, n, 'free', now(), now() FROM unnest($2::text[]) n", bank_id, names)


async def test_similar_names_are_searched_through_their_index_in_a_bank_the_statistics_do_not_know(
    bank_dsn: str,
) -> None:
    """A bank that grew after the last ANALYZE, as one does by small retains: PostgreSQL believes it
    holds no entity, and planned the search as a read of all of its entities by the name index, each
    name's trigrams computed and the whole bank sorted by distance (~1.8 ms a name at 400 entities)."""
    conn = await asyncpg.connect(bank_dsn)
    try:
        await conn.execute("ALTER TABLE entities SET (autovacuum_enabled = off)")  # the statistics stay stale
        await conn.execute("DELETE FROM entities")  # the analysed table holds one bank, as after a first import
        await conn.execute("INSERT INTO banks (bank_id, name) VALUES ('old', 'old'), ('grown', 'grown')")
        await insert_entities(conn, "old", [f"Old Person {i}" for i in range(2000)])
        await conn.execute("ANALYZE entities")
        await insert_entities(conn, "grown", [f"{first} {last}" for first in ("Marisol", "Marta", "Tomas", "Ines")
                                              for last in (f"Quintero{i}" for i in range(100))])
        async with conn.transaction():
            found = await trigram_candidates(conn, "grown", ["marisol quintero", "zebulon ashgrove"], 0.3)
            scans = {r["name"]: r["scans"] for r in await conn.fetch(  # this transaction's index scans
                "SELECT indexrelid::regclass::text AS name, pg_stat_get_xact_numscans(indexrelid) AS scans"
                " FROM pg_index WHERE indrelid = 'entities'::regclass")}
        assert scans.get("entities_name_knn", 0) >= 1 and scans.get("entities_bank_name", 0) == 0, scans
        assert list(found) == ["marisol quintero"], "no name of the bank is like the second"
        marisols = [r for r in found["marisol quintero"] if r["canonical_name"].startswith("Marisol ")]
        assert len(found["marisol quintero"]) == 10 and len(marisols) == 10, "the ten nearest, all Marisols"
        assert all(r["similarity"] >= 0.3 for r in found["marisol quintero"])
    finally:
        await conn.close()
