"""Concurrent load on a real `engram serve`: N clients retain into shared and private banks for a fixed
time, with recalls in between; then an audit of what the server holds.

Every retain carries a unique reference token, so the audit can tell, bank by bank, whether each
acknowledged retain is stored exactly once. Entity names overlap across clients (and caller-supplied
entities come in random letter case), so concurrent retains race to create the same entities.

Prints throughput (retains/s, recalls/s), p50/p95 latency of each, errors by status, facts lost and
duplicated, duplicate entities, stats mismatches, and the command that reproduces the run. Asserts
nothing (tests/integration/test_concurrency.py runs a short version and asserts).

    .venv/bin/python bench/load.py                          # 16 clients, 60 s
    .venv/bin/python bench/load.py --seconds 10 --clients 4
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.latency import create_database, percentile, running, spawn  # noqa: E402
from engram.store.embedded import EmbeddedPostgres  # noqa: E402

API = "/v1/default/banks"
NAMES = ["Alice", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Gustav", "Hana", "Ivan", "Jamila", "Kenji", "Lucia"]
PLACES = ["Lisbon", "Nairobi", "Osaka", "Quito", "Tallinn", "Hanoi", "Porto", "Dakar"]
TOPICS = ["the harbour mural", "a chess tournament", "the cedar bookshelf", "a folk album", "the night train"]
TOKEN = re.compile(r"\bref\d{2}x\d{5}\b")


@dataclass
class Sample:
    kind: str  # retain | recall
    bank: str
    status: int  # HTTP status; 0 when the request itself failed (timeout, connection)
    seconds: float
    token: str | None = None
    error: str | None = None


@dataclass
class LoadRun:
    clients: int
    seconds: float
    banks: list[str]
    samples: list[Sample] = field(default_factory=list)

    def of(self, kind: str) -> list[Sample]:
        return [s for s in self.samples if s.kind == kind]

    def accepted(self) -> dict[str, set[str]]:
        """Tokens of the retains answered 200, by bank."""
        tokens: dict[str, set[str]] = defaultdict(set)
        for sample in self.of("retain"):
            if sample.status == 200 and sample.token:
                tokens[sample.bank].add(sample.token)
        return tokens


@dataclass
class Audit:
    expected: int = 0  # acknowledged retains
    found: int = 0  # of those, stored
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)  # tokens stored in more than one fact
    unacknowledged: int = 0  # stored although the client saw no 200 (e.g. a client-side timeout)
    duplicate_entities: dict[str, list[str]] = field(default_factory=dict)  # bank → names
    entities: int = 0
    stats_mismatches: list[str] = field(default_factory=list)


def _item(rng: random.Random, token: str) -> dict[str, Any]:
    first, second = rng.sample(NAMES, 2)
    text = f"{first} met {second} in {rng.choice(PLACES)} about {rng.choice(TOPICS)}, ticket {token}."
    extra = rng.choice(NAMES)
    spelled = rng.choice([extra, extra.lower(), extra.upper()])  # case must not split an entity
    return {"content": text, "entities": [{"text": spelled}], "context": "load"}


def _client(url: str, index: int, deadline: float, own: str, shared: list[str], recall_every: int,
            seed: int, out: list[Sample]) -> None:
    rng = random.Random(seed * 1000 + index)
    with httpx.Client(base_url=url, timeout=120) as http:
        n = 0
        written: list[str] = []  # banks this client has written to: they exist when it recalls them
        while time.monotonic() < deadline:
            n += 1
            # The first two retains of a client go to its own bank and to "its" shared bank, so every bank
            # is written even on a slow machine; after that, half and half at random.
            if n <= 2:
                bank = own if n == 1 else shared[index % len(shared)]
            else:
                bank = own if rng.random() < 0.5 else rng.choice(shared)
            token = f"ref{index:02d}x{n:05d}"
            out.append(_timed(http, "retain", bank, {"items": [_item(rng, token)]}, token))
            if out[-1].status == 200 and bank not in written:
                written.append(bank)
            if n % recall_every == 0 and written:
                # Only a bank this client has written to: a shared one another client has not yet
                # created answers 404, rightly (a fast server made that race common).
                query = f"Where did {rng.choice(NAMES)} meet {rng.choice(NAMES)}?"
                out.append(_timed(http, "recall", rng.choice(written), {"query": query, "budget": "mid"}))


def _timed(http: httpx.Client, kind: str, bank: str, body: dict[str, Any], token: str | None = None) -> Sample:
    path = f"{API}/{bank}/memories" + ("/recall" if kind == "recall" else "")
    started = time.perf_counter()
    try:
        response = http.post(path, json=body)
    except httpx.HTTPError as exc:
        return Sample(kind, bank, 0, time.perf_counter() - started, token, f"{type(exc).__name__}: {exc}")
    error = None if response.status_code == 200 else response.text[:300]
    return Sample(kind, bank, response.status_code, time.perf_counter() - started, token, error)


def run_load(url: str, *, clients: int = 16, seconds: float = 60, prefix: str = "load", shared_banks: int = 4,
             recall_every: int = 3, seed: int = 1) -> LoadRun:
    """`clients` threads, each retaining into its own bank or one of `shared_banks` shared ones (half and
    half) for `seconds`, with a recall after every `recall_every` retains."""
    shared = [f"{prefix}-shared-{k}" for k in range(shared_banks)]
    own = [f"{prefix}-own-{i:02d}" for i in range(clients)]
    run = LoadRun(clients, seconds, shared + own)
    outputs: list[list[Sample]] = [[] for _ in range(clients)]
    started = time.monotonic()
    threads = [threading.Thread(target=_client, args=(url, i, started + seconds, own[i], shared, recall_every, seed,
                                                      outputs[i]), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.monotonic() - started  # the last requests finish after the deadline
    run.samples = [sample for output in outputs for sample in output]
    return run


def _pages(http: httpx.Client, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        response = http.get(path, params={**(params or {}), "limit": 1000, "offset": len(found)})
        if response.status_code == 404:
            return []  # a bank no retain reached
        response.raise_for_status()
        page = response.json()
        found += page["items"]
        if not page["items"] or len(found) >= page["total"]:
            return found


def audit(url: str, run: LoadRun) -> Audit:
    """Compare what the clients were told with what the server holds, bank by bank."""
    result = Audit()
    accepted = run.accepted()
    with httpx.Client(base_url=url, timeout=120) as http:
        for bank in run.banks:
            memories = _pages(http, f"{API}/{bank}/memories/list")
            stored = Counter(token for m in memories for token in TOKEN.findall(m["text"]))
            expected = accepted.get(bank, set())
            result.expected += len(expected)
            result.found += len(expected & set(stored))
            result.lost += sorted(expected - set(stored))
            result.duplicated += sorted(token for token, count in stored.items() if count > 1)
            result.unacknowledged += len(set(stored) - expected)

            entities = _pages(http, f"{API}/{bank}/entities")
            result.entities += len(entities)
            names = Counter(e["canonical_name"].lower() for e in entities)
            if doubled := sorted(name for name, count in names.items() if count > 1):
                result.duplicate_entities[bank] = doubled

            if not memories and not expected:
                continue
            stats = http.get(f"{API}/{bank}/stats").json()
            checks = {
                "total_nodes": (stats["total_nodes"], len(memories)),
                "total_documents": (stats["total_documents"], len(stored)),
                "pending_operations": (stats["pending_operations"], 0),
            }
            result.stats_mismatches += [f"{bank}: {name} is {got}, expected {want}"
                                        for name, (got, want) in checks.items() if got != want]
    return result


def ms(samples: list[Sample], q: float) -> float:
    return percentile([s.seconds for s in samples], q) * 1000 if samples else float("nan")


def report(run: LoadRun, result: Audit) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("clients", f"{run.clients} ({len(run.banks) - run.clients} shared banks + "
                                               f"{run.clients} private), {run.seconds:.1f} s")]
    for kind in ("retain", "recall"):
        samples = run.of(kind)
        ok = [s for s in samples if s.status == 200]
        rows.append((f"{kind}s", f"{len(ok)} ok of {len(samples)}, {len(ok) / run.seconds:.1f}/s, "
                                 f"p50 {ms(ok, 0.5):.0f} ms, p95 {ms(ok, 0.95):.0f} ms"))
    errors = Counter(f"{s.kind} {s.status or s.error.split(':', 1)[0]}"
                     for s in run.samples if s.status != 200 and s.error)
    rows.append(("errors", ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "none"))
    rows.append(("facts lost (acknowledged, not stored)", f"{len(result.lost)} of {result.expected}"))
    rows.append(("facts stored twice", str(len(result.duplicated))))
    rows.append(("stored without a 200 (client-side timeout)", str(result.unacknowledged)))
    rows.append(("entities", f"{result.entities}, duplicates (case-insensitive): "
                             f"{sum(len(v) for v in result.duplicate_entities.values())}"))
    rows.append(("stats mismatches", "; ".join(result.stats_mismatches) or "none"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="how long the clients run (default 60)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--shared-banks", type=int, default=4, help="banks every client writes to (default 4)")
    parser.add_argument("--recall-every", type=int, default=3, help="a recall after every N retains (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="engram-load-"))
    postgres = EmbeddedPostgres(workdir / "pg-shared")
    try:
        dsn = create_database(postgres.start(), "bench_load")
        with running(spawn(workdir / "server", {"ENGRAM_DATABASE_URL": dsn}, "load")) as server:
            with server.client() as http:  # load the embedding model before the clock starts
                http.post(f"{API}/warm-up/memories", json={"items": [{"content": "Warm-up."}]}).raise_for_status()
                http.post(f"{API}/warm-up/memories/recall", json={"query": "warm-up"}).raise_for_status()
            print(f"{args.clients} clients for {args.seconds:g} s…", flush=True)
            run = run_load(server.url, clients=args.clients, seconds=args.seconds, shared_banks=args.shared_banks,
                           recall_every=args.recall_every, seed=args.seed)
            result = audit(server.url, run)
    finally:
        postgres.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rows = report(run, result)
    width = max(len(name) for name, _ in rows)
    print("\nEngram under concurrent load (offline pipeline: no LLM)")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/load.py", *sys.argv[1:]])
    print(f"\nreproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
