"""`/metrics` counts the embedder's work by priority: the texts it embedded, their tokens and the CPU its
runs took, so an operator (and `bench/client_perf.py`) can tell the model's share of a server's CPU and
how much of it was work no one waited on (`engram.cpu_priority`)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import start_server

COUNTERS = ("engram_embedder_texts_total", "engram_embedder_tokens_total", "engram_embedder_cpu_seconds_total")


@pytest.fixture
def own_server(isolated_dsn: str) -> Iterator[httpx.Client]:
    """A server of its own (offline), so no other test's work moves its counters, once it has embedded
    its warm-up text (`api.app.warm_models` runs in the background after /health answers: on a busy
    machine its text landed among a retain's)."""
    running = start_server(isolated_dsn, name="embedder-metrics")
    try:
        with running.client() as client:
            deadline = time.monotonic() + 60
            while counters(client)["engram_embedder_texts_total"] < 1:
                assert time.monotonic() < deadline, "the server never embedded its warm-up text"
                time.sleep(0.05)
            yield client
    finally:
        running.stop()


def counters(client: httpx.Client, priority: str = "normal") -> dict[str, float]:
    text = client.get("/metrics").text
    found = {}
    for name in COUNTERS:
        match = re.search(rf'^{name}{{priority="{priority}"}} (\S+)$', text, re.MULTILINE)
        found[name] = float(match.group(1)) if match else 0.0
    return found


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in COUNTERS}


def test_metrics_count_every_text_embedded_its_tokens_and_the_cpu_of_the_runs(own_server: httpx.Client) -> None:
    client, bank = own_server, "embedder-metrics"
    client.put(f"/v1/default/banks/{bank}", json={}).raise_for_status()
    client.patch(f"/v1/default/banks/{bank}/config",
                 json={"updates": {"enable_auto_consolidation": False}}).raise_for_status()

    start = counters(client)
    three_facts = ("Maya adopted a beagle named Otis in March. Tomas Berg repaired the old lighthouse. "
                   "The bakery on Elm Street sells rye bread.")
    client.post(f"/v1/default/banks/{bank}/memories",
                json={"items": [{"content": three_facts}]}).raise_for_status()
    listed = client.get(f"/v1/default/banks/{bank}/memories/list").json()
    assert listed["total"] == 3, "the offline extractor makes one fact of each sentence"
    retained = grown(start, counters(client))
    assert retained["engram_embedder_texts_total"] == 3, "one vector for each new fact"
    # each fact's text and its date: at least a token for each of the 20 words, and not hundreds
    assert 20 <= retained["engram_embedder_tokens_total"] <= 120
    assert retained["engram_embedder_cpu_seconds_total"] > 0

    before = counters(client)
    client.post(f"/v1/default/banks/{bank}/memories/recall",
                json={"query": "Which dog did Maya adopt?"}).raise_for_status()
    recalled = grown(before, counters(client))
    assert recalled["engram_embedder_texts_total"] == 1, "the query's vector"
    assert recalled["engram_embedder_cpu_seconds_total"] > 0

    before = counters(client)
    client.post(f"/v1/default/banks/{bank}/memories/recall",
                json={"query": "Which dog did Maya adopt?"}).raise_for_status()
    assert grown(before, counters(client))["engram_embedder_texts_total"] == 0, "a repeated query is cached"

    low, normal = counters(client, "low"), counters(client)
    client.post(f"/v1/default/banks/{bank}/memories",
                json={"items": [{"content": "Priya Zhou moved to Valparaiso."},
                                {"content": "Rosa Reyes took up pottery."}]}).raise_for_status()
    in_bulk = grown(low, counters(client, "low"))
    assert in_bulk["engram_embedder_texts_total"] == 2, "a retain of several items embeds at low priority"
    assert in_bulk["engram_embedder_cpu_seconds_total"] > 0
    assert grown(normal, counters(client))["engram_embedder_texts_total"] == 0
