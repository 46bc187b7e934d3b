"""Semantic links of a retain with very many new facts. The side connections of a bulk retain compare
every new fact with every other, since they cannot read the transaction's facts from the table: for
the ~33,000 facts of one 2 MB document that ran past the pool's 300 s statement timeout, and the
retain failed. Beyond `SIDE_SEARCH_MAX_FACTS` the search stays in the transaction, through the index,
in statements of at most `LINK_STATEMENT_FACTS` facts. The thresholds are lowered here, so a few dozen
facts stand for tens of thousands."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from engram.store import facts_write as fw
from engram.store import semantic_links
from tests.support.retained_store import store_after_retaining

BANK = "many-facts"
PEOPLE = ["Mira", "Tomas", "Ines", "Omar", "Greta", "Hugo"]
DOINGS = ["keeps bees on the roof", "restored a wooden boat", "plays the cello at night", "sells nets at the market",
          "paints the harbour wall", "rows to the island at dawn", "bakes rye bread on Fridays",
          "repairs bicycles in the shed", "teaches chess at the school", "grows tomatoes by the mill"]
FACTS = [f"{person} {doing}." for person in PEOPLE for doing in DOINGS]  # 60: a bulk retain's path

SEMANTIC_LINKS = ("SELECT from_unit, to_unit, round(weight::numeric, 4) FROM memory_links"
                  " WHERE bank_id = $1 AND link_type = 'semantic' ORDER BY 1, 2")


@pytest.fixture
async def pool(isolated_dsn: str) -> Any:
    async with store_after_retaining(isolated_dsn, BANK, FACTS, pool_size=3) as pool:
        yield pool


async def facts(conn: asyncpg.Connection) -> tuple[list[uuid.UUID], list[Any]]:
    rows = await conn.fetch("SELECT id, embedding FROM memory_units WHERE bank_id = $1 ORDER BY id", BANK)
    return [row["id"] for row in rows], [row["embedding"] for row in rows]


async def links_made_again(conn: asyncpg.Connection, link: Any) -> list[tuple[Any, ...]]:
    """The bank's semantic links as `link()` makes them again, in a transaction rolled back after."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute("DELETE FROM memory_links WHERE bank_id = $1 AND link_type = 'semantic'", BANK)
        await link()
        return [tuple(row) for row in await conn.fetch(SEMANTIC_LINKS, BANK)]
    finally:
        await transaction.rollback()


async def test_links_searched_in_runs_of_statements_are_those_of_one(pool: asyncpg.Pool, monkeypatch: Any) -> None:
    async with pool.acquire() as conn:
        ids, _ = await facts(conn)
        assert len(ids) == 60

        async def link() -> None:
            await fw.insert_semantic_links(conn, BANK, ids, exact=False)

        whole = await links_made_again(conn, link)
        monkeypatch.setattr(fw, "LINK_STATEMENT_FACTS", 7)
        in_runs = await links_made_again(conn, link)
    assert len(whole) > 60, "the facts are alike enough to link"
    assert in_runs == whole


async def test_a_retain_with_more_new_facts_than_the_sides_compare_searches_in_its_transaction(
    pool: asyncpg.Pool, monkeypatch: Any
) -> None:
    idle_meanwhile: list[int] = []
    async with pool.acquire() as conn:
        ids, vectors = await facts(conn)

        async def meanwhile() -> None:  # the transaction's other work: how many connections the pool still has
            idle_meanwhile.append(pool.get_idle_size())

        async def link() -> None:
            await semantic_links.link_bulk(conn, pool, BANK, ids, vectors, meanwhile())

        async def link_inside() -> None:
            await fw.insert_semantic_links(conn, BANK, ids)

        await links_made_again(conn, link)
        assert idle_meanwhile == [0], "60 facts: two side connections searched beside the transaction"
        monkeypatch.setattr(semantic_links, "SIDE_SEARCH_MAX_FACTS", 50)
        searched = await links_made_again(conn, link)
        assert idle_meanwhile == [0, 2], "more than 50 facts: the pool's two other connections stayed idle"
        assert searched == await links_made_again(conn, link_inside), "the transaction's own search's links"
    assert len(searched) > 60
