"""Concurrent load, bounded for CI: 16 clients retain for ~10 s into 4 shared banks and their own,
with recalls in between and entity names shared by all (in random letter case). Afterwards nothing
acknowledged is missing or doubled, no bank has two entities of one name, nothing answered 5xx and
every bank's stats match its contents. `bench/load.py` is the same run at full length, with figures."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.load import audit, report, run_load
from tests.conftest import RunningServer, start_server

CLIENTS = 16
SECONDS = 10


@pytest.fixture
def load_server(isolated_dsn: str) -> Iterator[RunningServer]:
    running = start_server(isolated_dsn, name="load")
    with running.client() as http:  # load the embedding model before the clock starts
        http.post("/v1/default/banks/warm-up/memories", json={"items": [{"content": "Warm-up."}]}).raise_for_status()
    yield running
    running.stop()


def test_sixteen_concurrent_clients_lose_and_double_nothing(load_server: RunningServer, bank_id: str) -> None:
    run = run_load(load_server.url, clients=CLIENTS, seconds=SECONDS, prefix=bank_id)
    result = audit(load_server.url, run)
    for name, value in report(run, result):
        print(f"{name}: {value}")  # the figures, with pytest -s

    failures = [s for s in run.samples if s.status != 200]
    assert not failures, f"{len(failures)} requests failed, e.g. {failures[:3]}"
    retains = run.of("retain")
    assert run.of("recall") and len(retains) >= CLIENTS, "every client got work done"
    assert {s.bank for s in retains} == set(run.banks), "every bank, shared and private, was written"
    assert result.expected == len(retains)
    assert result.lost == [], "every acknowledged retain is stored"
    assert result.duplicated == [], "and stored once"
    assert result.duplicate_entities == {}, "concurrent retains converge on one entity per name"
    assert result.stats_mismatches == []

    with httpx.Client(base_url=load_server.url, timeout=60) as http:
        shared = f"/v1/default/banks/{bank_id}-shared-0"
        first = http.get(f"{shared}/memories/list", params={"limit": 1}).json()["items"][0]["text"]
        name = first.split()[0]  # "Alice met Bruno in Lisbon about …"
        found = http.post(f"{shared}/memories/recall", json={"query": f"Who did {name} meet?"}).json()
        assert found["results"], "the shared bank answers recalls after the load"
        entities = http.get(f"{shared}/entities", params={"limit": 1000}).json()["items"]
        spellings = [e["canonical_name"] for e in entities if e["canonical_name"].lower() == name.lower()]
        assert len(spellings) == 1, f"{name}, {name.lower()} and {name.upper()} are one entity: {spellings}"
