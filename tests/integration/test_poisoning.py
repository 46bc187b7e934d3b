"""Requests that used to poison a bank or lose a write: facts dated at the ends of the calendar broke
every later recall; an async retain whose operation id belonged to another bank was acknowledged and
dropped; an LLM error containing a NUL byte could never be recorded, so its operation was re-run
forever. Each is checked through a real server."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from importlib import resources
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, _admin
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM

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


# --- item 4: operation ids are an idempotency key within one bank --------------------------------


def test_an_operation_id_from_another_bank_is_a_409_never_a_silent_drop(http: httpx.Client) -> None:
    first, second = f"test-{uuid.uuid4().hex[:10]}", f"test-{uuid.uuid4().hex[:10]}"
    operation_id = str(uuid.uuid4())
    ours = {"async": True, "operation_id": operation_id,
            "items": [{"content": "The quartermaster counts the sails every Monday."}]}
    accepted = http.post(memories(first), json=ours)
    assert accepted.status_code == 200 and accepted.json()["operation_id"] == operation_id, accepted.text
    assert wait_for_operation(http, first, operation_id)["status"] == "completed"

    theirs = {"async": True, "operation_id": operation_id,
              "items": [{"content": "The navigator charts the reef every Tuesday."}]}
    refused = http.post(memories(second), json=theirs)
    assert refused.status_code == 409, refused.text
    assert first not in refused.text, "the refusal must not say which bank holds the id"
    assert "operation_id" in refused.json()["detail"]
    assert http.get(f"{BANKS}/{second}/operations/{operation_id}").json()["status"] == "not_found"
    assert http.delete(f"{BANKS}/{second}/operations/{operation_id}").status_code == 404

    again = http.post(memories(first), json=ours)  # the same request again: idempotent
    assert again.status_code == 200 and again.json()["operation_id"] == operation_id, again.text
    other_request = {**ours, "items": [{"content": "Something else entirely."}]}
    assert http.post(memories(first), json=other_request).status_code == 409
    texts = [m["text"] for m in http.get(f"{memories(first)}/list").json()["items"]]
    assert len([t for t in texts if "quartermaster" in t]) == 1, texts
    assert not any("Something else" in t for t in texts)

    fresh = http.post(memories(second), json={**theirs, "operation_id": str(uuid.uuid4())})
    assert fresh.status_code == 200, fresh.text
    assert wait_for_operation(http, second, fresh.json()["operation_id"])["status"] == "completed"
    assert any("navigator" in m["text"] for m in http.get(f"{memories(second)}/list").json()["items"])


# --- item 5: text the database cannot hold ---------------------------------------------------------


@pytest.fixture
def llm_http(llm_server: RunningServer) -> Iterator[httpx.Client]:
    with llm_server.client() as client:
        yield client


def one_fact_per_line(request: ChatRequest) -> dict[str, Any]:
    text = request.user_text.split("Text:\n", 1)[-1]
    return {"facts": [{"what": line.strip(), "fact_type": "world"} for line in text.splitlines() if line.strip()]}


def test_an_llm_error_holding_a_nul_fails_the_operation_readably(llm_http: httpx.Client, llm: ScriptedLLM,
                                                                 bank_id: str) -> None:
    body = json.dumps({"error": {"message": "model said \u0000no\u0000 to \ud800 this", "type": "invalid_request"}})
    llm.handler = lambda request: Reply.error(400, body)
    queued = llm_http.post(memories(bank_id), json={
        "async": True, "items": [{"content": "The cartographer redrew the northern coast."}]})
    assert queued.status_code == 200, queued.text
    operation_id = queued.json()["operation_id"]

    failed = wait_for_operation(llm_http, bank_id, operation_id, timeout=20)
    assert failed["status"] == "failed", failed
    reason = failed["error_message"]
    assert "HTTP 400" in reason and "model said no to \ufffd this" in reason, reason
    assert "\x00" not in reason

    llm.handler = one_fact_per_line
    assert llm_http.post(f"{BANKS}/{bank_id}/operations/{operation_id}/retry").status_code == 200
    assert wait_for_operation(llm_http, bank_id, operation_id)["status"] == "completed"
    texts = [m["text"] for m in llm_http.get(f"{memories(bank_id)}/list").json()["items"]]
    assert any("cartographer" in t for t in texts), texts


def test_llm_output_the_database_cannot_hold_is_stored_cleaned(llm_http: httpx.Client, llm: ScriptedLLM,
                                                               bank_id: str) -> None:
    def answer(request: ChatRequest) -> Any:
        if request.schema_name == "ExtractionOutput":
            return {"facts": [{"what": "The cartog\u0000rapher met Ysolde \ud83c at the port.", "fact_type": "world",
                               "entities": ["Ysol\u0000de", "port \udfff"]}]}
        return one_fact_per_line(request)

    llm.handler = answer
    response = llm_http.post(memories(bank_id), json={"items": [{"content": "The cartographer met Ysolde."}]})
    assert response.status_code == 200, response.text
    [fact] = llm_http.get(f"{memories(bank_id)}/list").json()["items"]
    assert fact["text"].startswith("The cartographer met Ysolde \ufffd at the port"), fact
    names = {e["canonical_name"] for e in llm_http.get(f"{BANKS}/{bank_id}/entities").json()["items"]}
    assert "Ysolde" in names and "port \ufffd" in names, names
