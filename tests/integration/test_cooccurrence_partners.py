"""The co-occurrence partners an entity match is scored on: each candidate's MAX_PARTNERS most frequent
partners, of which only those among the mention's neighbours are read (the rest change no score)."""

from __future__ import annotations

import uuid

import asyncpg

from engram.settings import Settings
from engram.store.entities import MAX_PARTNERS, cooccurrence_partners
from engram.store.pool import open_store


async def test_partners_are_ranked_among_all_then_only_the_asked_ones_are_read(isolated_dsn: str) -> None:
    await (await open_store(Settings(database_url=isolated_dsn), min_size=1, max_size=1)).close()  # the schema
    hub = uuid.UUID("80000000-0000-4000-8000-000000000000")  # in the middle: partners on both sides of it
    # MAX_PARTNERS + 5 partners, the i-th co-occurring (MAX_PARTNERS + 6 - i) times: rank i. About half
    # the ids sort before the hub's, so the hub is on both sides of the pairs (entity_a < entity_b).
    partners = [uuid.uuid4() for _ in range(MAX_PARTNERS + 5)]
    stranger = uuid.uuid4()
    conn = await asyncpg.connect(isolated_dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id, name) VALUES ('partners', 'partners')")
        await conn.execute(
            "INSERT INTO entities (id, bank_id, canonical_name) SELECT id, 'partners', 'entity ' || n"
            " FROM unnest($1::uuid[]) WITH ORDINALITY AS e(id, n)", [hub, stranger, *partners])
        await conn.execute(
            "INSERT INTO entity_cooccurrences (bank_id, entity_a, entity_b, count)"
            " SELECT 'partners', least($1, p), greatest($1, p), $2 - n"
            " FROM unnest($3::uuid[]) WITH ORDINALITY AS x(p, n)",
            hub, MAX_PARTNERS + 6, partners)
        first, last_kept, first_dropped, least = (partners[0], partners[MAX_PARTNERS - 1], partners[MAX_PARTNERS],
                                                  partners[-1])
        found = await cooccurrence_partners(conn, [hub], [first, last_kept, first_dropped, least, stranger])
        assert found == {hub: {first, last_kept}}
        everyone = await cooccurrence_partners(conn, [hub], [*partners, stranger])
        assert everyone == {hub: set(partners[:MAX_PARTNERS])}
        assert await cooccurrence_partners(conn, [hub], []) == {}
    finally:
        await conn.close()
