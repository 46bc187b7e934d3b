"""Entity-resolution throughput on a bank that already holds many entities.

Fills a bank with N entities (default 10,000) and their co-occurrences, then resolves batches of
mentions the way retain does (exact names, near names that need scoring, and new names), each
batch in its own transaction, and prints mentions/s. Prints figures; asserts nothing.

    .venv/bin/python bench/entity_resolution.py [--entities 10000] [--batches 40] [--batch-mentions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram.retain.entities import Mention, store_entities  # noqa: E402
from engram.store.embedded import EmbeddedPostgres  # noqa: E402
from engram.store.migrate import apply_migrations  # noqa: E402

FIRST = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farah", "Goran", "Hana", "Ivan", "Jonas", "Keiko", "Luis"]
LAST = ["Chen", "Rossi", "Novak", "Okafor", "Silva", "Tanaka", "Weber", "Kowalski", "Haddad", "Larsen"]
PLACES = ["Lab", "Studio", "Works", "Institute", "Garage", "Foundry", "Collective", "Bureau"]


def entity_name(n: int) -> str:
    return f"{FIRST[n % len(FIRST)]} {LAST[(n // len(FIRST)) % len(LAST)]} {PLACES[n % len(PLACES)]} {n}"


async def fill(conn: asyncpg.Connection, bank: str, count: int) -> list[str]:
    names = [entity_name(n) for n in range(count)]
    await conn.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank)
    await conn.execute(
        "INSERT INTO entities (id, bank_id, canonical_name, mention_count) "
        "SELECT gen_random_uuid(), $1, n, 1 + (random() * 20)::int FROM unnest($2::text[]) AS n",
        bank, names,
    )
    await conn.execute("ANALYZE entities")
    return names


def mentions_batch(rng: random.Random, names: list[str], size: int) -> list[Mention]:
    """A retain's worth of facts: 3 names each, a mix of exact (60 %), near (20 %) and new (20 %)."""
    out = []
    for _ in range(max(1, size // 3)):
        picked = []
        for _ in range(3):
            roll = rng.random()
            name = rng.choice(names)
            if roll < 0.6:
                picked.append(name)
            elif roll < 0.8:
                picked.append(" ".join(name.split()[:2]))  # a shorter form: needs candidate scoring
            else:
                picked.append(f"{rng.choice(FIRST)} {uuid.uuid4().hex[:6]}")
        out.append(Mention(uuid.uuid4(), picked))
    return out


async def run(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="engram-bench-entities-"))
    pg = EmbeddedPostgres(home)
    try:
        dsn = pg.start()
        conn = await asyncpg.connect(dsn)
        await apply_migrations(conn)
        bank = "bench-entities"
        started = time.perf_counter()
        names = await fill(conn, bank, args.entities)
        print(f"filled {len(names):,} entities in {time.perf_counter() - started:.1f} s")
        rng = random.Random(7)
        durations, mentions = [], 0
        for _ in range(args.batches):
            batch = mentions_batch(rng, names, args.batch_mentions)
            # memory_units rows must exist for unit_entities' foreign key: insert stub units first.
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding) "
                    "SELECT u, $1, 'bench', 'world', array_fill(0, ARRAY[384])::vector FROM unnest($2::uuid[]) u",
                    bank, [m.unit_id for m in batch],
                )
                t = time.perf_counter()
                await store_entities(conn, bank, batch)
                durations.append(time.perf_counter() - t)
            mentions += sum(len(m.names) for m in batch)
        total = sum(durations)
        print(f"resolved {mentions:,} mentions in {args.batches} batches: {mentions / total:,.0f} mentions/s, "
              f"batch p50 {statistics.median(durations) * 1000:.1f} ms, "
              f"p95 {sorted(durations)[int(0.95 * len(durations))] * 1000:.1f} ms")
        count = await conn.fetchval("SELECT count(*) FROM entities WHERE bank_id = $1", bank)
        print(f"entities now: {count:,}")
        print(f"reproduce: .venv/bin/python bench/entity_resolution.py --entities {args.entities} "
              f"--batches {args.batches} --batch-mentions {args.batch_mentions}")
        await conn.close()
    finally:
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-mentions", type=int, default=60)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
