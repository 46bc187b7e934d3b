"""Latency and footprint of a real `engram serve` process: start time (PostgreSQL already running, and
cold with the embedded PostgreSQL), resident memory, sync retain latency (scripted LLM and offline),
offline ingest throughput, and recall latency at 1k and 10k memories in one bank.

Prints a table and the command that reproduces it; asserts nothing.

    .venv/bin/python bench/latency.py            # full run, several minutes
    .venv/bin/python bench/latency.py --quick    # small smoke run, well under a minute
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.support.scripted_llm

from engram.store.embedded import EmbeddedPostgres, running_server  # noqa: E402
from tests.support.scripted_llm import ChatRequest, ScriptedLLM  # noqa: E402

API = "/v1/default/banks"


# --- one server process -------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    home: Path
    start_seconds: float

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=600)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # A server killed before its shutdown leaves the embedded PostgreSQL it started running.
        leftover = running_server(self.home / "pg")
        if leftover is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover.pid, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(home: Path, extra_env: dict[str, str], name: str) -> Server:
    """Start `engram serve` and time it from spawn to the first 200 on /health."""
    home.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    env.update({"ENGRAM_HOME": str(home), "ENGRAM_LOG_LEVEL": "WARNING", **extra_env})
    log_path = home / f"{name}.log"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "engram.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = started + 180
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name}: server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return Server(url, process, log_path, home, time.perf_counter() - started)
        time.sleep(0.005)
    process.kill()
    raise RuntimeError(f"{name}: no 200 on /health within 180 s:\n{log_path.read_text()[-3000:]}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def create_database(dsn: str, name: str) -> str:
    import asyncpg

    async def create() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    head, _, query = dsn.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}?{query}"


# --- figures ----------------------------------------------------------------------------------------------


def uptime() -> str:
    """`uptime`'s line: the machine's load beside a benchmark's figures."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def reproduce_line(script: str) -> str:
    """The command line that reran this benchmark, as `reproduce: …`."""
    return "reproduce: " + " ".join(shlex.quote(a) for a in [".venv/bin/python", script, *sys.argv[1:]])


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def ms(samples: list[float]) -> str:
    return f"p50 {percentile(samples, 0.5) * 1000:7.1f} ms   p95 {percentile(samples, 0.95) * 1000:7.1f} ms"


@dataclass
class Report:
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add(self, measure: str, value: str) -> None:
        self.rows.append((measure, value))
        print(f"  {measure}: {value}", flush=True)

    def print(self, command: str) -> None:
        width = max(len(m) for m, _ in self.rows)
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        python = platform.python_version()
        print(f"\nEngram latency — {platform.node()}, {os.cpu_count()} CPUs ({cpu}), Python {python}")
        print(f"{'measure'.ljust(width)}  value")
        print(f"{'-' * width}  {'-' * 40}")
        for measure, value in self.rows:
            print(f"{measure.ljust(width)}  {value}")
        print(f"\nreproduce: {command}")


# --- synthetic memories and queries --------------------------------------------------------------------

NAMES = ["Alice", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Gustav", "Hana", "Ivan", "Jamila", "Kenji",
         "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sami", "Tove", "Umar", "Vera",
         "Wen", "Ximena", "Yusuf", "Zofia", "Arjun", "Bea", "Cyrus", "Dmitri"]
PLACES = ["Lisbon", "Nairobi", "Osaka", "Quito", "Tallinn", "Hanoi", "Porto", "Dakar", "Bergen", "Cusco",
          "Zagreb", "Perth", "Leipzig", "Tbilisi", "Oaxaca", "Galway", "Malmo", "Kochi", "Bilbao", "Hobart"]
ACTIVITIES = [
    ("adopted", "a rescue greyhound"), ("bought", "a second-hand piano"), ("planted", "an olive tree"),
    ("repaired", "a vintage motorbike"), ("painted", "a mural of the harbour"), ("wrote", "a short story"),
    ("cooked", "a lentil curry"), ("visited", "the old observatory"), ("sold", "a sailing dinghy"),
    ("learned", "to play the cello"), ("organised", "a chess tournament"), ("built", "a cedar bookshelf"),
    ("photographed", "the northern lights"), ("translated", "a poetry collection"), ("ran", "a half marathon"),
    ("baked", "a sourdough loaf"), ("taught", "a pottery class"), ("recorded", "a folk album"),
    ("designed", "a mobile game"), ("restored", "a stained glass window"), ("hiked", "a volcanic ridge"),
    ("knitted", "a wool scarf"), ("founded", "a book club"), ("lost", "a silver bracelet"),
]
WHEN = ["last spring", "in March", "on a rainy Sunday", "during the summer festival", "two years ago",
        "over the holidays", "in early October", "after moving house", "before the wedding", "at dawn"]
REASONS = ["because the neighbours asked", "to raise money for the library", "as a birthday surprise",
           "after a long week at work", "to impress an old friend", "for the local newspaper"]


def sentence(rng: random.Random) -> str:
    verb, thing = rng.choice(ACTIVITIES)
    return (f"{rng.choice(NAMES)} {verb} {thing} in {rng.choice(PLACES)} {rng.choice(WHEN)} "
            f"{rng.choice(REASONS)}.")


def item(rng: random.Random, sentences: int = 3) -> dict[str, Any]:
    return {"content": " ".join(sentence(rng) for _ in range(sentences)), "context": "bench"}


def queries(rng: random.Random, count: int) -> list[str]:
    shapes = [
        lambda: f"What did {rng.choice(NAMES)} do in {rng.choice(PLACES)}?",
        lambda: f"Who {' '.join(rng.choice(ACTIVITIES))}?",
        lambda: f"When did {rng.choice(NAMES)} {rng.choice(ACTIVITIES)[0]} something?",
        lambda: f"Which city did {rng.choice(NAMES)} visit {rng.choice(WHEN)}?",
        lambda: f"Why did someone {rng.choice(ACTIVITIES)[0]} {rng.choice(ACTIVITIES)[1]}?",
    ]
    found: dict[str, None] = {}
    while len(found) < count:
        found[rng.choice(shapes)()] = None
    return list(found)


# --- the measurements ------------------------------------------------------------------------------------


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    if response.status_code != 200:
        raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:500]}")
    return response.json()


def memory_count(http: httpx.Client, bank: str) -> int:
    return http.get(f"{API}/{bank}/memories/list", params={"limit": 1}).json()["total"]


def retain_latencies(http: httpx.Client, bank: str, runs: int, rng: random.Random) -> list[float]:
    post(http, f"{API}/{bank}/memories", {"items": [item(rng, 2)]})  # first call pays for lazy loading
    return [timed(lambda: post(http, f"{API}/{bank}/memories", {"items": [item(rng, 2)]})) for _ in range(runs)]


def ingest(http: httpx.Client, bank: str, target: int, batch: int, rng: random.Random) -> tuple[int, int, float]:
    """Retain batches until the bank holds `target` memories; returns (items, memories added, seconds)."""
    before = count = memory_count(http, bank)
    items = 0
    seconds = 0.0
    while count < target:
        # ~3 memories per item: size the last batch so the bank lands close to the target.
        size = max(1, min(batch, (target - count + 2) // 3))
        seconds += timed(lambda size=size: post(http, f"{API}/{bank}/memories",
                                                {"items": [item(rng) for _ in range(size)]}))
        items += size
        count = memory_count(http, bank)
    return items, count - before, seconds


def recall_latencies(http: httpx.Client, bank: str, texts: list[str]) -> list[float]:
    post(http, f"{API}/{bank}/memories/recall", {"query": "warm-up query"})
    return [timed(lambda q=q: post(http, f"{API}/{bank}/memories/recall", {"query": q})) for q in texts]


def extraction_answer(request: ChatRequest) -> dict[str, Any]:
    return {"facts": [
        {"what": "Alice adopted a rescue greyhound in Lisbon", "fact_type": "world", "fact_kind": "event",
         "occurred_start": "2024-03-10T00:00:00Z", "entities": ["Alice", "Lisbon"]},
        {"what": "The assistant suggested a vet in Lisbon", "fact_type": "assistant", "entities": ["Lisbon"]},
    ]}


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


def measure_starts(report: Report, workdir: Path, dsn: str, repeats: int) -> None:
    warm = []
    for n in range(repeats):
        db_dsn = create_database(dsn, f"bench_start_{n}")
        with running(spawn(workdir / f"start-{n}", {"ENGRAM_DATABASE_URL": db_dsn}, "start")) as server:
            warm.append(server.start_seconds)
    report.add("start → /health 200, PostgreSQL running, new database",
               f"median {percentile(warm, 0.5):.2f} s   (n={repeats}, min {min(warm):.2f} s)")

    cold_home = workdir / "cold"
    with running(spawn(cold_home, {}, "cold-initdb")) as server:
        report.add("cold start, embedded PostgreSQL initdb + start", f"{server.start_seconds:.2f} s")
    with running(spawn(cold_home, {}, "cold-restart")) as server:
        report.add("cold start, embedded PostgreSQL start (data dir exists)", f"{server.start_seconds:.2f} s")


def measure_offline(report: Report, workdir: Path, dsn: str, args: argparse.Namespace, rng: random.Random) -> None:
    db_dsn = create_database(dsn, "bench_offline")
    with running(spawn(workdir / "offline", {"ENGRAM_DATABASE_URL": db_dsn}, "offline")) as server, \
            server.client() as http:
        report.add("RSS after start (at first /health 200)", f"{rss_mb(server.pid):.0f} MB")
        post(http, f"{API}/bench-warm/memories", {"items": [item(rng)]})
        post(http, f"{API}/bench-warm/memories/recall", {"query": "who adopted a dog?"})
        report.add("RSS with the embedding model warm", f"{rss_mb(server.pid):.0f} MB")

        samples = retain_latencies(http, "bench-retain-offline", args.runs, rng)
        report.add(f"sync retain, 1 item of 2 sentences, offline (n={args.runs})", ms(samples))

        bank = "bench-recall"
        http.put(f"{API}/{bank}", json={}).raise_for_status()
        texts = queries(random.Random(7), args.queries)
        total_items = total_memories = 0
        total_seconds = 0.0
        for size in args.sizes:
            items, added, seconds = ingest(http, bank, size, args.batch, rng)
            total_items, total_memories, total_seconds = (
                total_items + items, total_memories + added, total_seconds + seconds)
            if items:
                report.add(f"offline ingest up to {size:,} memories (batches of {args.batch} items)",
                           f"{items / seconds:6.1f} items/s   {added / seconds:6.1f} memories/s   "
                           f"({items} items in {seconds:.1f} s)")
            held = memory_count(http, bank)
            # Two passes: the first runs right after the bulk ingest (planner statistics may be stale),
            # the second shows the steady state.
            for label in ("first pass, right after ingest", "second pass"):
                report.add(f"recall at {held:,} memories, {label} ({len(texts)} queries)",
                           ms(recall_latencies(http, bank, texts)))
        report.add(f"RSS after {memory_count(http, bank):,} memories", f"{rss_mb(server.pid):.0f} MB")


def measure_llm_retain(report: Report, workdir: Path, dsn: str, args: argparse.Namespace, rng: random.Random) -> None:
    with ScriptedLLM(handler=extraction_answer) as llm:
        env = {**llm.settings_env(), "ENGRAM_DATABASE_URL": create_database(dsn, "bench_llm")}
        with running(spawn(workdir / "llm", env, "scripted-llm")) as server, server.client() as http:
            samples = retain_latencies(http, "bench-retain-llm", args.runs, rng)
            report.add(f"sync retain, 1 item, scripted LLM, 2 facts (n={args.runs})", ms(samples))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a small run: a smoke test of the bench itself")
    parser.add_argument("--runs", type=int, help="retain latency samples (default 30, quick 5)")
    parser.add_argument("--queries", type=int, help="distinct recall queries per bank size (default 300, quick 20)")
    parser.add_argument("--sizes", help="comma-separated bank sizes for recall (default 1000,10000; quick 200)")
    parser.add_argument("--batch", type=int, default=100, help="items per ingest request (default 100)")
    parser.add_argument("--starts", type=int, help="warm start repeats (default 3, quick 1)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    args.runs = args.runs or (5 if args.quick else 30)
    args.queries = args.queries or (20 if args.quick else 300)
    args.sizes = [int(s) for s in (args.sizes or ("200" if args.quick else "1000,10000")).split(",")]
    args.starts = args.starts or (1 if args.quick else 3)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    report = Report()
    workdir = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    postgres = EmbeddedPostgres(workdir / "pg-shared")
    try:
        dsn = postgres.start()
        print("measuring…", flush=True)
        measure_starts(report, workdir, dsn, args.starts)
        measure_llm_retain(report, workdir, dsn, args, rng)
        measure_offline(report, workdir, dsn, args, rng)
    finally:
        postgres.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/latency.py", *sys.argv[1:]])
    report.print(command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
