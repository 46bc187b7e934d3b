"""memory_links' integrity without foreign keys (migration 027): every link joins two existing facts,
both locked until the inserting transaction ends, and deleting facts deletes their links both ways.
These are what the two foreign keys guaranteed; their per-link checks were ~45 % of a bulk retain's
link insert at 133,000 facts."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram import Memory

LINK = "INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight) VALUES ($1, $2, 'linked', $3, 1.0)"


def linked_bank(dsn: str) -> None:
    """A bank of alike facts from one day: each has semantic and temporal links to the others."""
    memory = Memory(database_url=dsn)
    try:
        memory.retain_batch("linked", [{"content": f"Ravi repaired the blue bicycle of house {n} on Monday."}
                                       for n in range(8)])
    finally:
        memory.close()


async def links_touching(conn: asyncpg.Connection, fact: uuid.UUID) -> tuple[int, int]:
    """(links from the fact, links to it)."""
    row = await conn.fetchrow("SELECT count(*) FILTER (WHERE from_unit = $1) AS out,"
                              " count(*) FILTER (WHERE to_unit = $1) AS into FROM memory_links", fact)
    return row["out"], row["into"]


async def waits_on_a_lock(observer: asyncpg.Connection, waiting: asyncpg.Connection) -> bool:
    """Whether `waiting`'s backend comes to wait on a lock within 10 s."""
    pid = waiting.get_server_pid()
    for _ in range(200):
        if await observer.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_deleting_facts_deletes_their_links_both_ways(isolated_dsn: str) -> None:
    linked_bank(isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        fact = await conn.fetchval("SELECT l.from_unit FROM memory_links l WHERE EXISTS"
                                   " (SELECT FROM memory_links k WHERE k.to_unit = l.from_unit) ORDER BY 1 LIMIT 1")
        out, into = await links_touching(conn, fact)
        assert out > 0 and into > 0, "the fact has links both ways"
        total = await conn.fetchval("SELECT count(*) FROM memory_links")
        await conn.execute("DELETE FROM memory_units WHERE id = $1", fact)
        assert await links_touching(conn, fact) == (0, 0)
        assert await conn.fetchval("SELECT count(*) FROM memory_links") == total - out - into, "the others stay"
    finally:
        await conn.close()


async def test_a_link_to_or_from_a_missing_fact_is_refused(isolated_dsn: str) -> None:
    linked_bank(isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        fact = await conn.fetchval("SELECT id FROM memory_units ORDER BY id LIMIT 1")
        ghost = uuid.uuid4()
        for ends in ((fact, ghost), (ghost, fact)):
            with pytest.raises(asyncpg.ForeignKeyViolationError, match=str(ghost)):
                await conn.execute(LINK, *ends, "causal")
        assert await conn.fetchval("SELECT count(*) FROM memory_links WHERE $1 IN (from_unit, to_unit)", ghost) == 0
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def racing(dsn: str) -> AsyncIterator[tuple[asyncpg.Connection, asyncpg.Connection, asyncpg.Connection,
                                                  uuid.UUID, uuid.UUID]]:
    """A linked bank, three connections (a writer of links, a deleter of facts, an observer) and two
    of its facts with no causal link between them."""
    linked_bank(dsn)
    writer, deleter, observer = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        rows = await observer.fetch("SELECT id FROM memory_units ORDER BY id LIMIT 2")
        await observer.execute("DELETE FROM memory_links WHERE link_type = 'causal'")
        yield writer, deleter, observer, rows[0]["id"], rows[1]["id"]
    finally:
        for conn in (writer, deleter, observer):
            await conn.close()


async def test_a_fact_deleted_while_a_link_to_it_is_being_written_waits_and_takes_the_link(
    isolated_dsn: str,
) -> None:
    async with racing(isolated_dsn) as (writer, deleter, observer, source, target):
        writing = writer.transaction()
        await writing.start()
        await writer.execute(LINK, source, target, "causal")
        delete = asyncio.ensure_future(deleter.execute("DELETE FROM memory_units WHERE id = $1", target))
        assert await waits_on_a_lock(observer, deleter), "the delete waits for the linking transaction"
        assert not delete.done()
        await writing.commit()
        await asyncio.wait_for(delete, 10)
        assert await links_touching(observer, target) == (0, 0), "no link is left to the deleted fact"


async def test_a_link_to_a_fact_being_deleted_waits_and_is_refused_once_it_is_gone(isolated_dsn: str) -> None:
    async with racing(isolated_dsn) as (writer, deleter, observer, source, target):
        deleting = deleter.transaction()
        await deleting.start()
        await deleter.execute("DELETE FROM memory_units WHERE id = $1", target)
        link = asyncio.ensure_future(writer.execute(LINK, source, target, "causal"))
        assert await waits_on_a_lock(observer, writer), "the link waits for the deleting transaction"
        await deleting.commit()
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await asyncio.wait_for(link, 10)
        assert await links_touching(observer, target) == (0, 0)


async def test_deleting_a_bank_deletes_its_links(isolated_dsn: str) -> None:
    # The bank's facts go by the banks key's cascade, a statement of its own: the links go with them.
    linked_bank(isolated_dsn)
    conn = await asyncpg.connect(isolated_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM memory_links") > 0
        await conn.execute("DELETE FROM banks WHERE bank_id = 'linked'")
        assert await conn.fetchval("SELECT count(*) FROM memory_units") == 0
        assert await conn.fetchval("SELECT count(*) FROM memory_links") == 0
    finally:
        await conn.close()
