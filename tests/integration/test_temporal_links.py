"""Temporal links: each new fact is linked to the facts of its bank and type nearest to it in time,
at most 20, within 24 hours on either side, weighted max(0.3, 1 - hours apart / 24)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tests.conftest import RunningServer, start_server

T = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
THINGS = ["a kite", "a lamp", "a violin", "a bicycle", "a teapot", "a rug", "a map", "a clock", "a drum",
          "a hammock", "a globe", "a kettle", "a mirror", "a scarf", "a lantern", "a compass"]


@pytest.fixture
def start_server_on_db(isolated_dsn: str) -> Iterator[tuple[RunningServer, str]]:
    """An offline server on a database of its own, and that database (the test reads the links)."""
    server = start_server(isolated_dsn, name="temporal-links")
    yield server, isolated_dsn
    server.stop()


def temporal_links(dsn: str, text: str) -> dict[str, float]:
    """The texts the fact `text` links to, with their weights (read on a thread of its own)."""
    async def read() -> dict[str, float]:
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch(
                """
                SELECT o.text, l.weight FROM memory_links l
                JOIN memory_units n ON n.id = l.from_unit JOIN memory_units o ON o.id = l.to_unit
                WHERE n.text LIKE $1 AND l.link_type = 'temporal'
                """,
                text + "%",
            )
            return {row["text"]: row["weight"] for row in rows}
        finally:
            await conn.close()

    found: list[dict[str, float]] = []
    thread = threading.Thread(target=lambda: found.append(asyncio.run(read())))
    thread.start()
    thread.join()
    return found[0]


def test_a_new_fact_links_to_its_twenty_nearest_in_time(
    start_server_on_db: tuple[RunningServer, str], bank_id: str
) -> None:
    server, dsn = start_server_on_db
    # Facts 1..13 hours before and after the target (26), and two beyond the 24-hour window. The 20
    # nearest are those 1..10 hours away on both sides; 11 hours is the first left out.
    offsets = [h for k in range(1, 14) for h in (-k, k)] + [-30, 26]
    items = [{"content": f"Mira bought {THINGS[i % len(THINGS)]} on trip {i}.",
              "timestamp": (T + timedelta(hours=h)).isoformat()} for i, h in enumerate(offsets)]
    with server.client() as http:
        response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
        assert response.status_code == 200, response.text
        # Retained on its own afterwards: its links are computed against facts already stored.
        response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
            {"content": "Mira sold her old car to a neighbour.", "timestamp": T.isoformat()}]})
        assert response.status_code == 200, response.text

    links = temporal_links(dsn, "Mira sold her old car")
    expected = {}
    for i, h in enumerate(offsets):
        if abs(h) <= 10:
            expected[f"Mira bought {THINGS[i % len(THINGS)]} on trip {i}."] = max(0.3, 1 - abs(h) / 24)
    assert {text.split(" | ")[0]: round(weight, 5) for text, weight in links.items()} == {
        text: round(weight, 5) for text, weight in expected.items()
    }


def test_temporal_links_stay_within_one_bank(start_server_on_db: tuple[RunningServer, str], bank_id: str) -> None:
    server, dsn = start_server_on_db
    with server.client() as http:
        for bank, text in ((bank_id + "-other", "Mira painted a fence."), (bank_id, "Mira fixed a gate.")):
            response = http.post(f"/v1/default/banks/{bank}/memories",
                                 json={"items": [{"content": text, "timestamp": T.isoformat()}]})
            assert response.status_code == 200, response.text
    assert temporal_links(dsn, "Mira fixed a gate") == {}

