"""Requests that used to poison a bank or lose a write: facts dated at the ends of the calendar broke
every later recall; an async retain whose operation id belonged to another bank was acknowledged and
dropped; an LLM error containing a NUL byte could never be recorded, so its operation was re-run
forever. Each is checked through a real server."""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

import httpx

from tests.conftest import _admin

BANKS = "/v1/default/banks"
MIGRATIONS = resources.files("engram.store.migrations")
FIRST_MOMENT = "0001-01-01T00:00:00Z"
LAST_MOMENT = "9999-12-31T23:59:59.999999Z"


def memories(bank_id: str) -> str:
    return f"{BANKS}/{bank_id}/memories"


def wait_for_operation(http: httpx.Client, bank_id: str, operation_id: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        operation = http.get(f"{BANKS}/{bank_id}/operations/{operation_id}").json()
        if operation["status"] in ("completed", "failed"):
            return operation
        assert time.monotonic() < deadline, f"operation {operation_id} still {operation['status']}"
        time.sleep(0.2)


# --- item 3: dates at the ends of the calendar --------------------------------------------------


def test_facts_dated_at_the_ends_of_the_calendar_do_not_break_recall(http: httpx.Client, bank_id: str) -> None:
    items = [
        {"content": "The lighthouse keeper lit the first lamp.", "timestamp": FIRST_MOMENT},
        {"content": "The lighthouse keeper will retire the last lamp.", "timestamp": LAST_MOMENT},
        {"content": "The lighthouse keeper painted the tower in June 2023.", "timestamp": "2023-06-15T10:00:00Z"},
    ]
    http.post(memories(bank_id), json={"items": items}).raise_for_status()

    queries: list[dict[str, Any]] = [
        {"query": "What did the lighthouse keeper do?"},
        {"query": "What did the lighthouse keeper do in June 2023?"},
        {"query": "What did the lighthouse keeper do last year?", "query_timestamp": FIRST_MOMENT},
        {"query": "What did the lighthouse keeper do yesterday?", "query_timestamp": LAST_MOMENT},
        {"query": "What did the lighthouse keeper do next week?", "query_timestamp": "9999-12-31T23:59:59Z"},
        {"query": "lighthouse keeper lamp", "temporal_window": {"start": FIRST_MOMENT, "end": LAST_MOMENT}},
        {"query": "lighthouse keeper lamp", "trace": True},
    ]
    for body in queries:
        response = http.post(f"{memories(bank_id)}/recall", json=body)
        assert response.status_code == 200, (body, response.text)
        texts = [r["text"] for r in response.json()["results"]]
        assert any("first lamp" in t for t in texts) and any("last lamp" in t for t in texts), (body, texts)

    listed = http.get(f"{memories(bank_id)}/list").json()["items"]
    dates = {m["text"]: m.get("mentioned_at") for m in listed}
    first = next(d for t, d in dates.items() if "first lamp" in t)
    last = next(d for t, d in dates.items() if "last lamp" in t)
    assert first.startswith("0001-01-01") and last.startswith("9999-12-31"), dates
    assert http.get(f"{BANKS}/{bank_id}/stats").status_code == 200


def test_infinite_dates_stored_by_older_versions_do_not_break_recall(http: httpx.Client, pg_dsn: str,
                                                                    bank_id: str) -> None:
    """Older versions stored the calendar's ends as ±infinity, which reads back as naive datetimes."""
    http.post(memories(bank_id), json={"items": [
        {"content": "The ferry to the island runs at dawn.", "timestamp": "2024-03-01T06:00:00Z"},
        {"content": "The ferry to the island stops at dusk.", "timestamp": "2024-03-01T18:00:00Z"},
    ]}).raise_for_status()
    _admin(pg_dsn, f"UPDATE memory_units SET mentioned_at = 'infinity' "
                   f"WHERE bank_id = '{bank_id}' AND text LIKE '%dawn%'")
    _admin(pg_dsn, f"UPDATE memory_units SET occurred_start = '-infinity', occurred_end = 'infinity' "
                   f"WHERE bank_id = '{bank_id}' AND text LIKE '%dusk%'")
    for body in ({"query": "When does the ferry run?"}, {"query": "What did the ferry do in March 2024?"}):
        response = http.post(f"{memories(bank_id)}/recall", json=body)
        assert response.status_code == 200, response.text
        assert len(response.json()["results"]) == 2

    _admin(pg_dsn, MIGRATIONS.joinpath("012_finite_fact_dates.sql").read_text())  # repairs such rows
    listed = {m["text"]: m for m in http.get(f"{memories(bank_id)}/list").json()["items"]}
    dawn = next(m for t, m in listed.items() if "dawn" in t)
    dusk = next(m for t, m in listed.items() if "dusk" in t)
    assert dawn["mentioned_at"].startswith("9999-12-31T23:59:59.999998"), dawn
    assert dusk["occurred_start"].startswith("0001-01-01T00:00:00.000001"), dusk


def test_a_moment_with_no_utc_value_is_400_naming_the_field(http: httpx.Client, bank_id: str) -> None:
    """0001-01-01 at +14:00 is still year 0 in UTC: refused where it comes in, never stored."""
    before_the_calendar = "0001-01-01T00:00:00+14:00"
    item = {"content": "Too early.", "timestamp": before_the_calendar}
    response = http.post(memories(bank_id), json={"items": [item]})
    assert response.status_code == 400 and response.json()["field"] == "items[0].timestamp", response.text
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    response = http.post(f"{memories(bank_id)}/recall", json={"query": "lamp", "query_timestamp": before_the_calendar})
    assert response.status_code == 400 and response.json()["field"] == "query_timestamp", response.text


def test_relative_dates_next_to_the_ends_of_the_calendar_are_kept(http: httpx.Client, bank_id: str) -> None:
    """Resolving "tomorrow" on the last day (or "yesterday" on the first) must not overflow."""
    items = [
        {"content": "Tomorrow the keeper leaves the island.", "timestamp": LAST_MOMENT},
        {"content": "Yesterday the keeper arrived on the island.", "timestamp": FIRST_MOMENT},
        {"content": "Next year the keeper trains an apprentice.", "timestamp": "9999-06-01T00:00:00Z"},
    ]
    response = http.post(memories(bank_id), json={"items": items})
    assert response.status_code == 200, response.text
    recall = http.post(f"{memories(bank_id)}/recall", json={"query": "When does the keeper leave the island?"})
    assert recall.status_code == 200, recall.text
    assert any("leaves the island" in r["text"] for r in recall.json()["results"])
