"""A bank's stats count its links exactly while that is quick, and keep the counts for a while once
counting took `ENGRAM_STATS_LINK_COUNTS_SLOW_MS` or longer (~1 s at 100,000 memories): `refresh=true`,
clearing the bank and deleting it count again. The facts' counts are exact on every call."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, start_server


def retain_alike_facts(http: httpx.Client, bank_id: str, first: int, count: int) -> None:
    """Alike facts on one day: each new one links to the earlier ones (semantic and temporal links)."""
    items = [{"content": f"Ines repaired the red boat number {n} at the harbour on Monday.",
              "timestamp": "2026-06-01T09:00:00Z"} for n in range(first, first + count)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


def stats(http: httpx.Client, bank_id: str, **params: str) -> dict:
    response = http.get(f"/v1/default/banks/{bank_id}/stats", params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def keeping_server(pg_dsn: str) -> Iterator[RunningServer]:
    """Every count is "slow" here, so every bank's link counts are kept for the minute."""
    running = start_server(pg_dsn, {"ENGRAM_STATS_LINK_COUNTS_SLOW_MS": "0"}, name="stats-kept")
    yield running
    running.stop()


def test_a_quickly_counted_bank_has_exact_link_counts_on_every_call(http: httpx.Client, bank_id: str) -> None:
    retain_alike_facts(http, bank_id, 0, 3)
    first = stats(http, bank_id)
    assert first["total_links"] > 0
    retain_alike_facts(http, bank_id, 3, 3)
    second = stats(http, bank_id)
    assert second["total_nodes"] == 2 * first["total_nodes"]
    assert second["total_links"] > first["total_links"]


def test_slowly_counted_links_are_kept_until_refresh_clear_or_delete(
    keeping_server: RunningServer, bank_id: str
) -> None:
    with keeping_server.client() as http:
        retain_alike_facts(http, bank_id, 0, 3)
        first = stats(http, bank_id)
        assert first["total_links"] > 0

        retain_alike_facts(http, bank_id, 3, 3)
        kept = stats(http, bank_id)
        assert kept["total_nodes"] == 2 * first["total_nodes"], "the facts are counted on every call"
        assert (kept["total_links"], kept["links_breakdown"]) == (first["total_links"], first["links_breakdown"])

        refreshed = stats(http, bank_id, refresh="true")
        assert refreshed["total_links"] > first["total_links"]
        assert sum(refreshed["links_by_fact_type"].values()) == refreshed["total_links"]

        assert http.delete(f"/v1/default/banks/{bank_id}/memories").status_code == 200
        assert stats(http, bank_id)["total_links"] == 0, "a cleared bank's links are counted again"

        retain_alike_facts(http, bank_id, 0, 3)
        assert stats(http, bank_id, refresh="true")["total_links"] == first["total_links"]
        assert http.delete(f"/v1/default/banks/{bank_id}").status_code == 200
        assert http.put(f"/v1/default/banks/{bank_id}", json={}).status_code == 200
        assert stats(http, bank_id)["total_links"] == 0, "a deleted bank's links are counted again"
