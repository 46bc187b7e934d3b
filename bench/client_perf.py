"""What an agent waits for, measured through the official `hindsight-client` with its default
arguments: recall at two bank sizes (wall p50/p95 and CPU per recall, server and PostgreSQL apart),
sync retain of one item, bulk ingest of one-sentence facts next to the embedder's own throughput on
the same texts, and recall latency while a bulk ingest runs on the same server.

CPU time (utime + stime of the server process and of every PostgreSQL backend) is reported beside
wall time because it does not depend on what else the machine runs. Prints figures; asserts nothing.

    .venv/bin/python bench/client_perf.py                       # offline (no LLM), 1,000 and 5,000 memories
    .venv/bin/python bench/client_perf.py --llm                 # extraction through a scripted stub LLM
    .venv/bin/python bench/client_perf.py --quick               # smoke run
    .venv/bin/python bench/client_perf.py --py-spy recall.svg   # also profile the server during recall
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import Server, create_database, percentile, reproduce_line, rss_mb, spawn, uptime  # noqa: E402
from synthetic import facts, questions  # noqa: E402

from engram.store.embedded import EmbeddedPostgres  # noqa: E402
from tests.support.scripted_llm import ChatRequest, ScriptedLLM  # noqa: E402

CLOCK = os.sysconf("SC_CLK_TCK")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z']+)*")


def cpu_seconds(pids: list[int], with_exited_children: bool = False) -> float:
    """utime + stime of `pids`; with `with_exited_children`, also what their children that have exited
    spent (cutime + cstime), so a PostgreSQL backend or autovacuum worker that ends inside a phase
    does not take its CPU out of the total."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            if with_exited_children:
                total += int(fields[13]) + int(fields[14])
    return total / CLOCK


def postgres_cpu_seconds(pgdata: Path) -> float:
    """CPU of the postmaster and every backend, the ones that already exited included."""
    pids = postgres_pids(pgdata)
    return cpu_seconds(pids[:1], with_exited_children=True) + cpu_seconds(pids[1:])


def postgres_pids(pgdata: Path) -> list[int]:
    """The postmaster and its children (every backend)."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(entry))
    return pids


def embedder_counters(server: Server) -> tuple[float, float]:
    """The server's embedder CPU seconds and texts so far, at either priority, from its `/metrics`."""
    found = {"engram_embedder_cpu_seconds_total": 0.0, "engram_embedder_texts_total": 0.0}
    with server.client() as http:
        for line in http.get("/metrics").text.splitlines():
            series, _, value = line.rpartition(" ")
            name = series.partition("{")[0]
            if name in found:
                found[name] += float(value)
    return found["engram_embedder_cpu_seconds_total"], found["engram_embedder_texts_total"]


class CpuMeter:
    """CPU seconds the server and PostgreSQL spend inside a `with meter.phase():` block, and the part of
    the server's that ran its embedder (with the texts it embedded)."""

    def __init__(self, server: Server, pgdata: Path) -> None:
        self.server, self.pgdata = server, pgdata
        self.server_s = self.postgres_s = self.embedder_s = self.embedded = 0.0

    @contextlib.contextmanager
    def phase(self) -> Iterator[CpuMeter]:
        embedder0, texts0 = embedder_counters(self.server)
        server0, pg0 = cpu_seconds([self.server.pid]), postgres_cpu_seconds(self.pgdata)
        yield self
        self.server_s = cpu_seconds([self.server.pid]) - server0
        self.postgres_s = postgres_cpu_seconds(self.pgdata) - pg0
        embedder1, texts1 = embedder_counters(self.server)
        self.embedder_s, self.embedded = embedder1 - embedder0, texts1 - texts0

    def per_op_ms(self, ops: int) -> str:
        return (f"server {self.server_s / ops * 1000:6.1f} ms (embedder {self.embedder_s / ops * 1000:.1f} ms, "
                f"{self.embedded / ops:.2f} texts)   PostgreSQL {self.postgres_s / ops * 1000:6.1f} ms")


def stub_extraction(request: ChatRequest) -> dict[str, Any]:
    """One fact per sentence, capitalised word runs as entities (like the side-by-side harness's stub)."""
    text = request.user_text
    body = text.split("\n\n")[-1] if "\n\n" in text else text
    body = body.removeprefix("Text:\n")  # the prompt's label of the chunk (`retain.extraction`)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", body) if s.strip()]
    return {"facts": [{"what": s, "fact_type": "world", "entities": list(dict.fromkeys(_CAPITALISED.findall(s)))}
                      for s in sentences]}


def ms(samples: list[float]) -> str:
    return f"p50 {percentile(samples, 0.5) * 1000:7.1f} ms   p95 {percentile(samples, 0.95) * 1000:7.1f} ms"


def count(client: Any, bank: str) -> int:
    return int(client.list_memories(bank, limit=1).total or 0)


def ingest(client: Any, bank: str, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        client.retain_batch(bank, [{"content": t} for t in texts[start : start + batch]])
    return time.perf_counter() - started


def recall_phase(client: Any, meter: CpuMeter, bank: str, texts: list[str], label: str,
                 py_spy: str | None, server: Server) -> None:
    client.recall(bank, "warm-up question about someone")
    latencies, results = [], []
    spy = None
    if py_spy:
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.pid),
                                "--output", py_spy, "--rate", "250", "--nonblocking",
                                "--format", "flamegraph" if py_spy.endswith(".svg") else "raw"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    with meter.phase():
        for query in texts:
            started = time.perf_counter()
            response = client.recall(bank, query)
            latencies.append(time.perf_counter() - started)
            results.append(len(response.results or []))
    if spy is not None:
        spy.send_signal(2)
        spy.wait(timeout=60)
    print(f"  recall at {label} memories ({len(texts)} fresh queries, client defaults): {ms(latencies)}   "
          f"mean results {sum(results) / len(results):.0f}", flush=True)
    print(f"    CPU per recall: {meter.per_op_ms(len(texts))}", flush=True)


def embedder_rate(texts: list[str]) -> float:
    """Facts/s of the embedder alone on these texts, in this process (batches of 64, as retain does)."""
    from engram.models.embedder import embedder

    model = embedder()
    model.embed(texts[:64])
    started = time.perf_counter()
    cpu0 = time.process_time()
    model.embed(texts)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    print(f"  embedder alone on the same {len(texts)} texts: {len(texts) / wall:6.1f} texts/s "
          f"({cpu / len(texts) * 1000:.2f} ms CPU a text)", flush=True)
    return len(texts) / wall


def ingest_until(writer: Any, bank: str, seed: int, batch: int, first: int, stop: threading.Event) -> None:
    """Bulk-ingest fresh one-sentence items (`batch` a call, generated from offset `first` on) until `stop`."""
    offset = first
    while not stop.is_set():
        writer.retain_batch(bank, [{"content": t} for t in facts(seed, batch, offset)])
        offset += batch
    writer.close()


def recall_under_ingest(client_factory: Any, bank: str, seed: int, queries: list[str], batch: int,
                        blocks: int = 2) -> None:
    """Recall p50 alone and while another client bulk-ingests (`batch` fresh one-sentence items a call)
    into another bank of the same server, in alternating blocks (alone, during, alone, during, ...) so
    that the machine's drift over the run weighs on both sides alike."""
    reader = client_factory()
    alone: list[float] = []
    during: list[float] = []
    size = len(queries) // (2 * blocks)

    def timed(block: list[str], into: list[float]) -> None:
        for query in block:
            started = time.perf_counter()
            reader.recall(bank, query)
            into.append(time.perf_counter() - started)

    for index in range(blocks):
        timed(queries[2 * index * size : (2 * index + 1) * size], alone)
        stop = threading.Event()
        fresh = 1_000_000 * (index + 1)  # items no block wrote before
        thread = threading.Thread(target=ingest_until,
                                  args=(client_factory(), bank + "-writer", seed, batch, fresh, stop))
        thread.start()
        time.sleep(1.0)  # the ingest under way
        timed(queries[(2 * index + 1) * size : (2 * index + 2) * size], during)
        stop.set()
        thread.join()
    reader.close()
    print(f"  recall alone:                {ms(alone)}   ({blocks} blocks of {size} fresh queries)", flush=True)
    print(f"  recall during a bulk ingest: {ms(during)}   "
          f"(p50 ratio {percentile(during, 0.5) / percentile(alone, 0.5):.2f}, "
          f"p95 ratio {percentile(during, 0.95) / percentile(alone, 0.95):.2f})", flush=True)


def run(args: argparse.Namespace, server: Server, pgdata: Path) -> None:
    from hindsight_client import Hindsight

    def client_factory() -> Any:
        return Hindsight(base_url=server.url, timeout=900)

    client = client_factory()
    meter = CpuMeter(server, pgdata)
    bank = "perf"
    client.create_bank(bank, name=bank)
    client.update_bank_config(bank, enable_observations=False, enable_auto_consolidation=False)

    sync_texts = [f"{a} {b}" for a, b in zip(facts(args.seed, 60, 1), facts(args.seed, 60, 2), strict=True)]
    client.retain(bank + "-sync", sync_texts[0], context="bench")
    samples = []
    with meter.phase():
        for text in sync_texts[1 : args.runs + 1]:
            started = time.perf_counter()
            client.retain(bank + "-sync", text, context="bench")
            samples.append(time.perf_counter() - started)
    print(f"  sync retain, 1 item of 2 sentences (n={len(samples)}): {ms(samples)}", flush=True)
    print(f"    CPU per retain: {meter.per_op_ms(len(samples))}", flush=True)

    all_texts = facts(args.seed, args.sizes[-1])
    queries = questions(args.seed, args.queries * (len(args.sizes) + 1))
    held = 0
    for n, size in enumerate(args.sizes):
        texts = all_texts[held:size]
        with meter.phase():
            seconds = ingest(client, bank, texts, args.batch)
        held = size
        print(f"  bulk ingest to {size:,} ({len(texts)} one-sentence items, {args.batch} a call): "
              f"{len(texts) / seconds:6.1f} items/s   CPU per item: {meter.per_op_ms(len(texts))}", flush=True)
        if n == 0:
            embedder_rate(texts[:2000])
        qs = queries[n * args.queries : (n + 1) * args.queries]
        spy = None
        if args.py_spy:
            stem, dot, ext = args.py_spy.rpartition(".")
            spy = f"{stem}-{size}.{ext}" if dot else f"{args.py_spy}-{size}"
        recall_phase(client, meter, bank, qs, f"{count(client, bank):,}", spy, server)
    print(f"  RSS of the server at {count(client, bank):,} memories: {rss_mb(server.pid):.0f} MB", flush=True)
    recall_under_ingest(client_factory, bank, args.seed, queries[len(args.sizes) * args.queries :], args.batch)
    client.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--llm", action="store_true", help="extract through a scripted stub LLM (else offline)")
    parser.add_argument("--sizes", help="bank sizes for recall (default 1000,5000; quick 300)")
    parser.add_argument("--queries", type=int, help="fresh queries per size (default 100, quick 20)")
    parser.add_argument("--runs", type=int, help="sync retain samples (default 30, quick 5)")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--py-spy", help="profile the server's recalls with py-spy into PATH-<size>.EXT "
                        "(a flame graph for .svg, collapsed stacks otherwise)")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in (args.sizes or ("300" if args.quick else "1000,5000")).split(",")]
    args.queries = args.queries or (20 if args.quick else 100)
    args.runs = args.runs or (5 if args.quick else 30)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="engram-client-perf-"))
    postgres = EmbeddedPostgres(workdir / "pg-shared")
    llm = ScriptedLLM(handler=stub_extraction) if args.llm else None
    try:
        dsn = postgres.start()
        env = {"ENGRAM_DATABASE_URL": create_database(dsn, "client_perf")}
        if llm is not None:
            llm.start()
            env.update(llm.settings_env())
        print(f"uptime: {uptime()}", flush=True)
        server = spawn(workdir / "server", env, "client-perf")
        try:
            run(args, server, postgres.pgdata)
        finally:
            server.stop()
        print(f"uptime: {uptime()}")
    finally:
        if llm is not None:
            llm.stop()
        postgres.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(reproduce_line("bench/client_perf.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
