"""Every request does bounded work and none stalls the others: deep tag groups, an item carrying
thousands of entities and graphs over a busy bank are refused or capped at a documented limit, and
`/health` keeps answering while they are handled."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from engram.api.entities import MAX_GRAPH_EDGES
from engram.api.json_body import MAX_JSON_DEPTH
from engram.retain.prepare import MAX_ENTITIES_PER_ITEM, MAX_TAGS_PER_ITEM
from engram.types.memory import MAX_TAG_GROUP_DEPTH
from tests.conftest import RunningServer

HEALTH_WITHIN = 1.0  # seconds: what a stalled event loop would blow through


def beside_health(server: RunningServer, heavy: Callable[[httpx.Client], Any]) -> tuple[Any, float]:
    """Run `heavy` on a thread and probe /health on this one until it is done: (its result, the slowest
    /health answer)."""
    result: list[Any] = []

    def run() -> None:
        with server.client() as client:
            result.append(heavy(client))

    thread = threading.Thread(target=run)
    thread.start()
    slowest = 0.0
    with httpx.Client(base_url=server.url, timeout=60) as probe:
        while thread.is_alive() or slowest == 0.0:
            started = time.monotonic()
            assert probe.get("/health").status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.02)
    thread.join()
    return result[0], slowest


def nested_tag_group(depth: int) -> dict:
    group: dict = {"tags": ["a"]}
    for _ in range(depth - 1):
        group = {"and": [group]}
    return group


def distinct_name(seed: str) -> str:
    """A name no other generated name resembles (similar names may merge into one entity)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def recall(bank: str, **body: Any) -> Callable[[httpx.Client], httpx.Response]:
    return lambda http: http.post(f"/v1/default/banks/{bank}/memories/recall", json={"query": "apples", **body})


def test_tag_groups_nested_300_deep_are_refused_without_stalling(server: RunningServer, bank_id: str) -> None:
    response, slowest = beside_health(server, recall(bank_id, tag_groups=[nested_tag_group(300)]))
    assert response.status_code == 400, response.text[:500]
    body = response.json()
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in body["detail"]
    assert body["field"].startswith("tag_groups[0].and[0].and[0]"), body
    assert slowest < HEALTH_WITHIN, slowest


def test_tag_groups_have_their_own_nesting_limit(http: httpx.Client, bank_id: str) -> None:
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Apples.", "tags": ["a"]}]})
    deep = recall(bank_id, tag_groups=[nested_tag_group(MAX_TAG_GROUP_DEPTH + 1)])(http)
    assert deep.status_code == 400, deep.text
    assert deep.json() == {"detail": f"tag_groups: nested deeper than {MAX_TAG_GROUP_DEPTH} levels",
                           "error": "InvalidInput", "field": "tag_groups"}
    fits = recall(bank_id, tag_groups=[nested_tag_group(MAX_TAG_GROUP_DEPTH)])(http)
    assert fits.status_code == 200, fits.text
    assert [r["text"] for r in fits.json()["results"]] == ["Apples."]
    wide = recall(bank_id, tag_groups=[{"or": [{"tags": [f"t{i}"]} for i in range(300)]}])(http)
    assert wide.status_code == 400 and "more than 256 groups and leaves" in wide.json()["detail"], wide.text


def test_an_item_with_5000_entities_is_413_without_stalling(server: RunningServer, bank_id: str) -> None:
    item = {"content": "Alice met Bob.", "entities": [{"text": f"Person {i}"} for i in range(5000)]}

    def retain(http: httpx.Client) -> httpx.Response:
        return http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Fine."}, item]})

    response, slowest = beside_health(server, retain)
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["field"] == "items[1].entities"
    assert f"at most {MAX_ENTITIES_PER_ITEM} entities per item (got 5000)" in body["detail"]
    assert slowest < HEALTH_WITHIN, slowest
    with server.client() as http:
        assert http.get(f"/v1/default/banks/{bank_id}/config").status_code == 404, "nothing was stored"


def test_tags_per_item_are_bounded(http: httpx.Client, bank_id: str) -> None:
    item = {"content": "Tagged.", "tags": [f"t{i}" for i in range(MAX_TAGS_PER_ITEM + 1)]}
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [item]})
    assert response.status_code == 413, response.text
    assert response.json()["field"] == "items[0].tags"
    assert f"at most {MAX_TAGS_PER_ITEM} tags per item" in response.json()["detail"]


def test_the_entity_graph_holds_at_most_the_edge_limit(http: httpx.Client, bank_id: str) -> None:
    # Five items of 50 distinct entities each: 5 x C(50, 2) = 6125 co-occurrence edges.
    items = [
        {"content": f"Meeting {n} took place.", "resolve_entities": False,
         "entities": [{"text": distinct_name(f"guest {n}-{i}")} for i in range(MAX_ENTITIES_PER_ITEM)]}
        for n in range(5)
    ]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    graph = http.get(f"/v1/default/banks/{bank_id}/entities/graph").json()
    assert graph["total_entities"] == 250 and len(graph["nodes"]) == 250
    assert graph["total_edges"] == 6125
    assert len(graph["edges"]) == MAX_GRAPH_EDGES


def test_the_memory_graph_holds_at_most_the_edge_limit(http: httpx.Client, bank_id: str) -> None:
    # Twenty facts sharing the same 50 entities: 50 x C(20, 2) = 9500 shared-entity edges.
    shared = [{"text": distinct_name(f"crew {i}")} for i in range(MAX_ENTITIES_PER_ITEM)]
    items = [{"content": f"Voyage {n} set sail.", "entities": shared} for n in range(20)]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    graph = http.get(f"/v1/default/banks/{bank_id}/graph").json()
    assert graph["total_units"] == 20 and len(graph["nodes"]) == 20
    assert len(graph["edges"]) == MAX_GRAPH_EDGES


def test_a_retain_with_a_thousand_new_entity_names_does_not_stall(server: RunningServer, bank_id: str) -> None:
    # 24 items of 50 distinct names each: new names of one retain are matched against each other,
    # which compared every pair on the event loop (1,200 names held /health for tens of seconds).
    items = [
        {"content": f"Shipment {n} reached the depot.",
         "entities": [{"text": distinct_name(f"cargo {n}-{i}")} for i in range(MAX_ENTITIES_PER_ITEM)]}
        for n in range(24)
    ]

    def retain(http: httpx.Client) -> httpx.Response:
        return http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})

    response, slowest = beside_health(server, retain)
    assert response.status_code == 200, response.text
    assert slowest < HEALTH_WITHIN, slowest
    with server.client() as http:
        entities = http.get(f"/v1/default/banks/{bank_id}/entities", params={"limit": 1000}).json()
        assert entities["total"] == 24 * MAX_ENTITIES_PER_ITEM
