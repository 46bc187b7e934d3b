"""One bank grown to 100,000 memories through the bulk API (offline: no LLM, local embeddings),
with figures at each checkpoint: ingest rate of the last stretch, recall p50/p95 with the official
client's default request (fresh queries), CPU per item and per recall (server and PostgreSQL),
resident memory, and on-disk size per memory. Prints figures; asserts nothing.

    .venv/bin/python bench/scale.py                          # checkpoints 10,000 and 100,000 (hours on 2 busy cores)
    .venv/bin/python bench/scale.py --sizes 2000,10000       # a shorter run
    .venv/bin/python bench/scale.py --quick                  # smoke run
    .venv/bin/python bench/scale.py --keep /tmp/scale100k    # keep the bank (PostgreSQL's data dir) to profile
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from client_perf import CpuMeter, count, ms, postgres_pids  # noqa: E402
from latency import create_database, reproduce_line, spawn, uptime  # noqa: E402
from synthetic import facts, questions  # noqa: E402

from engram.store.embedded import EmbeddedPostgres  # noqa: E402

T = TypeVar("T")
TABLES = ["memory_units", "memory_unit_sentences", "memory_links", "unit_entities", "entities",
          "entity_cooccurrences", "chunks", "documents"]


def memory_mb(pids: list[int], field: str) -> float:
    """The processes' summed `field` in MB: VmRSS from /proc/PID/status, or Pss from smaps_rollup (each
    process's share of the pages it shares: PostgreSQL's backends each count, in their RSS, every page
    of shared buffers they have touched)."""
    total = 0
    for pid in pids:
        name = "status" if field == "VmRSS" else "smaps_rollup"
        try:
            for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def read_database(dsn: str, read: Callable[[Any], Awaitable[T]]) -> T:
    """`read(connection)` on a connection to `dsn`, run on a thread of its own: asyncio.run here would
    close the event loop hindsight-client keeps for this thread."""
    from concurrent.futures import ThreadPoolExecutor

    import asyncpg

    async def connected() -> T:
        conn = await asyncpg.connect(dsn)
        try:
            return await read(conn)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, connected()).result()


def disk_sizes(dsn: str) -> dict[str, int]:
    """Bytes of the database and of each table with its indexes and TOAST."""

    async def read(conn: Any) -> dict[str, int]:
        sizes = {"database": await conn.fetchval("SELECT pg_database_size(current_database())")}
        for table in TABLES:
            sizes[table] = await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", table)
        return sizes

    return read_database(dsn, read)


def wal_counters(dsn: str) -> dict[str, float]:
    """PostgreSQL's write-ahead log so far: bytes, full-page images, and checkpoints (timed, requested:
    a checkpoint requested by the log's size shows `max_wal_size` too small for the ingest)."""

    async def read(conn: Any) -> dict[str, float]:
        row = await conn.fetchrow("SELECT w.wal_bytes, w.wal_fpi, c.num_timed, c.num_requested"
                                  " FROM pg_stat_wal w, pg_stat_checkpointer c")
        return {key: float(value) for key, value in row.items()}

    return read_database(dsn, read)


def wal_figures(before: dict[str, float], after: dict[str, float], items: int) -> str:
    delta = {key: after[key] - before[key] for key in after}
    return (f"{delta['wal_bytes'] / items / 1024:.1f} kB a memory ({delta['wal_fpi'] / items:.1f} full-page images),"
            f" checkpoints {delta['num_timed']:.0f} timed / {delta['num_requested']:.0f} requested")


def recall_figures(client: Any, bank: str, queries: list[str], meter: CpuMeter) -> str:
    client.recall(bank, "warm-up question about someone")
    latencies = []
    with meter.phase():
        for query in queries:
            started = time.perf_counter()
            client.recall(bank, query)
            latencies.append(time.perf_counter() - started)
    return f"{ms(latencies)}   CPU per recall: {meter.per_op_ms(len(queries))}"


def run(args: argparse.Namespace, server: Any, pgdata: Path, dsn: str) -> None:
    from hindsight_client import Hindsight

    client = Hindsight(base_url=server.url, timeout=3600)
    meter = CpuMeter(server, pgdata)
    bank = "scale"
    client.create_bank(bank, name=bank)
    client.update_bank_config(bank, enable_observations=False, enable_auto_consolidation=False)
    queries = questions(args.seed, args.queries * len(args.sizes))
    held = 0
    first_rate = None
    for n, size in enumerate(args.sizes):
        wal_before = wal_counters(dsn)
        started = time.perf_counter()
        with meter.phase():
            # Generated a stretch at a time: 100,000 sentences are cheap, but no need to hold them all.
            for offset in range(held, size, args.batch):
                texts = facts(args.seed, min(args.batch, size - offset), offset)
                client.retain_batch(bank, [{"content": t} for t in texts])
        seconds = time.perf_counter() - started
        added = size - held
        held = size
        rate = added / seconds
        first_rate = first_rate or rate
        print(f"{size:,} memories ({count(client, bank):,} stored):", flush=True)
        print(f"  ingest of the last {added:,}: {rate:6.1f} items/s ({rate / first_rate:.0%} of the first stretch)"
              f"   CPU per item: {meter.per_op_ms(added)}", flush=True)
        print(f"  write-ahead log: {wal_figures(wal_before, wal_counters(dsn), added)}", flush=True)
        time.sleep(args.settle)  # let autovacuum analyse the new rows, as a live server would have
        qs = queries[n * args.queries : (n + 1) * args.queries]
        print(f"  recall ({len(qs)} fresh queries, client defaults): {recall_figures(client, bank, qs, meter)}",
              flush=True)
        pg_pids = postgres_pids(pgdata)
        server_mb, pg_mb = memory_mb([server.pid], "VmRSS"), memory_mb(pg_pids, "VmRSS")
        pg_pss = memory_mb(pg_pids, "Pss")
        print(f"  RSS: server {server_mb:.0f} MB, PostgreSQL {pg_mb:.0f} MB (PSS {pg_pss:.0f} MB)", flush=True)
        sizes = disk_sizes(dsn)
        per = {k: v / size for k, v in sizes.items()}
        tables = ", ".join(f"{k} {v:.0f}" for k, v in per.items() if k != "database" and v >= 1)
        print(f"  on disk: {sizes['database'] / 2**20:.0f} MB, {per['database']:.0f} bytes a memory "
              f"(per memory: {tables})", flush=True)
        print(f"  uptime: {uptime()}", flush=True)
    client.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", help="checkpoints (default 10000,100000; quick 500,1500)")
    parser.add_argument("--queries", type=int, help="fresh recall queries per checkpoint (default 100, quick 10)")
    parser.add_argument("--batch", type=int, default=500, help="items per retain_batch call (default 500)")
    parser.add_argument("--settle", type=float, help="seconds to wait after an ingest stretch (default 20, quick 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="work in this (new) directory and keep it: the bank stays in "
                        "its pg-shared/ data dir, database 'scale', for profiling afterwards")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in (args.sizes or ("500,1500" if args.quick else "10000,100000")).split(",")]
    args.queries = args.queries or (10 if args.quick else 100)
    args.settle = args.settle if args.settle is not None else (1.0 if args.quick else 20.0)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="engram-scale-"))
    postgres = EmbeddedPostgres(workdir / "pg-shared")
    try:
        dsn = create_database(postgres.start(), "scale")
        print(f"uptime: {uptime()}", flush=True)
        server = spawn(workdir / "server", {"ENGRAM_DATABASE_URL": dsn}, "scale")
        try:
            run(args, server, postgres.pgdata, dsn)
        finally:
            server.stop()
    finally:
        postgres.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(reproduce_line("bench/scale.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
