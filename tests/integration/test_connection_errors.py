"""Failures below the API answer cleanly: an unexpected database error is a JSON 500 that leaves the
keep-alive connection usable, and PostgreSQL going away in the middle of a request's transaction is
a 503 with Retry-After, after which the pool serves the next request."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, start_server
from tests.support.database import query, table_locked
from tests.support.faults import facts, retain, wait_for


@pytest.fixture
def own_server(isolated_dsn: str) -> Iterator[RunningServer]:
    running = start_server(isolated_dsn, name="connection-errors")
    yield running
    running.stop()


def local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried `response`; -1 once it is closed."""
    try:
        return response.extensions["network_stream"].get_extra_info("client_addr")[1]
    except OSError:
        return -1


def test_after_a_500_the_same_keep_alive_connection_serves_the_next_request(
    own_server: RunningServer, isolated_dsn: str, bank_id: str
) -> None:
    with own_server.client() as http:
        assert retain(http, bank_id, "Dorin fixed the well pump.").status_code == 200
        # A fault the server cannot foresee: the database refuses every new fact with an error of its own.
        query(isolated_dsn, "CREATE FUNCTION refuse_facts() RETURNS trigger LANGUAGE plpgsql AS "
                            "$$BEGIN RAISE EXCEPTION 'storage quota exceeded'; END$$")
        query(isolated_dsn, "CREATE TRIGGER refuse_facts BEFORE INSERT ON memory_units "
                            "FOR EACH ROW EXECUTE FUNCTION refuse_facts()")
        failed = retain(http, bank_id, "Dorin painted the well's roof.")
        assert failed.status_code == 500, failed.text
        assert failed.headers["content-type"] == "application/json"
        assert "storage quota exceeded" in failed.json()["detail"]
        assert failed.headers.get("connection") != "close"
        port = local_port(failed)

        query(isolated_dsn, "DROP TRIGGER refuse_facts ON memory_units")
        after = http.get(f"/v1/default/banks/{bank_id}/stats")
        assert after.status_code == 200, after.text
        assert local_port(after) == port, "the connection was kept open after the 500"
        assert retain(http, bank_id, "Dorin painted the well's roof.").status_code == 200
    assert "storage quota exceeded" in own_server.log(), "the unexpected error is logged"


def test_postgres_going_away_mid_transaction_answers_503_and_the_pool_recovers(
    own_server: RunningServer, isolated_dsn: str, bank_id: str
) -> None:
    first, lost = "Vera planted forty lime trees.", "Vera watered the lime trees at dawn."
    with own_server.client() as http:
        assert retain(http, bank_id, first).status_code == 200
        answers: list[httpx.Response] = []
        # The retain's transaction waits for the lock, so its connection is lost inside the transaction.
        with table_locked(isolated_dsn, "memory_units", "SHARE"):
            request = threading.Thread(target=lambda: answers.append(retain(http, bank_id, lost)))
            request.start()
            waiting = wait_for(lambda: query(
                isolated_dsn, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"), "the retain to wait inside its transaction")
            query(isolated_dsn, "SELECT pg_terminate_backend($1)", waiting[0]["pid"])
            request.join(60)
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"] == "StoreUnavailable"
        assert "database is unavailable" in answer.json()["detail"]
        assert int(answer.headers["Retry-After"]) > 0

        assert retain(http, bank_id, lost).status_code == 200, "the pool replaced the lost connection"
        assert facts(http, bank_id) == sorted([first, lost]), "the failed attempt left nothing behind"
