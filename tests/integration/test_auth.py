"""API keys: with `ENGRAM_API_KEYS` (or Hindsight's `HINDSIGHT_API_TENANT_API_KEY`) set, every route but
the health checks and the control plane's static files wants `Authorization: Bearer <key>`, and a key
with an allow-list of banks reaches those banks only — by path, MCP endpoint, bank list and chunk."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, separate_database, start_server

ADMIN = "admin-" + uuid.uuid4().hex
AGENT = "agent-" + uuid.uuid4().hex
TENANT = "tenant:key,with-separators"  # Hindsight's single key is taken verbatim
RUN = uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def secured(pg_dsn: str) -> Iterator[RunningServer]:
    env = {
        "ENGRAM_API_KEYS": f"{ADMIN}, {AGENT}:team-{RUN}-*|solo.{RUN}",
        "HINDSIGHT_API_TENANT_API_KEY": TENANT,
    }
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, env, name="auth")
        yield running
        running.stop()


def call(server: RunningServer, method: str, path: str, key: str | None = None, **kwargs: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)  # type: ignore[arg-type]


def retain(server: RunningServer, key: str, bank: str, text: str) -> httpx.Response:
    return call(server, "POST", f"/v1/default/banks/{bank}/memories", key, json={"items": [{"content": text}]})


def test_health_checks_answer_without_a_key(secured: RunningServer) -> None:
    for path in ("/health", "/health/live", "/health/ready"):
        assert call(secured, "GET", path).status_code == 200, path


def test_the_control_plane_pages_load_without_a_key_but_not_its_data(secured: RunningServer) -> None:
    page = call(secured, "GET", "/ui/")
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert call(secured, "POST", "/ui/").status_code == 401
    assert call(secured, "GET", "/v1/default/banks").status_code == 401


@pytest.mark.parametrize("path", ["/version", "/openapi.json", "/docs", "/metrics", "/v1/default/banks", "/mcp"])
def test_every_other_route_wants_a_key(secured: RunningServer, path: str) -> None:
    response = call(secured, "GET", path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"detail": "missing API key: send 'Authorization: Bearer <key>'", "error": "Unauthorized"}


def test_a_wrong_key_or_another_scheme_is_refused(secured: RunningServer) -> None:
    assert call(secured, "GET", "/v1/default/banks", "not-a-key").json()["detail"] == "invalid API key"
    assert call(secured, "GET", "/v1/default/banks", ADMIN[:-1]).status_code == 401
    basic = httpx.get(secured.url + "/v1/default/banks", headers={"Authorization": f"Basic {ADMIN}"})
    assert basic.status_code == 401
    # Nothing was written by the refused requests.
    refused = retain(secured, "wrong", f"team-{RUN}-refused", "This must not be stored.")
    assert refused.status_code == 401
    assert call(secured, "GET", f"/v1/default/banks/team-{RUN}-refused/config", ADMIN).status_code == 404


def test_the_scheme_is_case_insensitive(secured: RunningServer) -> None:
    response = httpx.get(secured.url + "/version", headers={"Authorization": f"bearer {ADMIN}"})
    assert response.status_code == 200


def test_an_unrestricted_key_reaches_every_bank(secured: RunningServer) -> None:
    bank = f"other-{RUN}-admin"
    assert retain(secured, ADMIN, bank, "Ada keeps the lighthouse log.").status_code == 200
    recall = call(secured, "POST", f"/v1/default/banks/{bank}/memories/recall", ADMIN, json={"query": "lighthouse"})
    assert recall.status_code == 200
    assert "lighthouse" in recall.json()["results"][0]["text"]
    assert call(secured, "GET", "/version", ADMIN).status_code == 200


def test_hindsight_tenant_key_is_accepted_verbatim(secured: RunningServer) -> None:
    assert call(secured, "GET", "/v1/default/banks", TENANT).status_code == 200
    assert call(secured, "GET", "/v1/default/banks", "tenant").status_code == 401  # not split at ':'


def test_a_bank_limited_key_reaches_only_its_banks(secured: RunningServer) -> None:
    mine, solo, theirs = f"team-{RUN}-red", f"solo.{RUN}", f"other-{RUN}-secret"
    assert retain(secured, AGENT, mine, "The red team meets at noon.").status_code == 200
    assert retain(secured, AGENT, solo, "Solo notes are private.").status_code == 200
    assert retain(secured, ADMIN, theirs, "The launch code is in the blue folder.").status_code == 200

    for method, path in [
        ("POST", f"/v1/default/banks/{theirs}/memories/recall"),
        ("GET", f"/v1/default/banks/{theirs}/memories/list"),
        ("GET", f"/v1/default/banks/{theirs}/config"),
        ("DELETE", f"/v1/default/banks/{theirs}"),
        ("PUT", f"/v1/default/banks/{theirs}"),
        ("GET", f"/v1/default/banks/solo-{RUN}/stats"),  # '.' in a pattern is a literal dot
        ("GET", f"/v1/default/banks/team-{RUN}/stats"),  # '*' needs the '-' before it
    ]:
        response = call(secured, method, path, AGENT, json={"query": "launch code"} if method == "POST" else None)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"] == "Forbidden"
        assert "may not use bank" in response.json()["detail"]

    recall = call(secured, "POST", f"/v1/default/banks/{mine}/memories/recall", AGENT, json={"query": "red team"})
    assert recall.status_code == 200 and recall.json()["results"]
    still_there = call(secured, "GET", f"/v1/default/banks/{theirs}/memories/list", ADMIN).json()
    assert still_there["total"] == 1


def test_a_bank_limited_key_lists_only_its_banks(secured: RunningServer) -> None:
    for bank in (f"team-{RUN}-blue", f"solo.{RUN}"):
        assert retain(secured, AGENT, bank, "Blue team notes.").status_code == 200
    for bank in (f"soloX{RUN}", f"other-{RUN}-list"):  # 'soloX…' would match if '.' were a regex dot
        assert retain(secured, ADMIN, bank, "Not for the agent.").status_code == 200

    listed = call(secured, "GET", "/v1/default/banks", AGENT, params={"limit": 1000}).json()
    ids = {bank["bank_id"] for bank in listed["banks"]}
    assert f"team-{RUN}-blue" in ids and f"solo.{RUN}" in ids
    assert all(b.startswith(f"team-{RUN}-") or b == f"solo.{RUN}" for b in ids), ids
    assert listed["total"] == len(ids)
    everything = call(secured, "GET", "/v1/default/banks", ADMIN, params={"limit": 1000}).json()
    assert {f"soloX{RUN}", f"other-{RUN}-list"} <= {bank["bank_id"] for bank in everything["banks"]}
    # A page past the end still counts only the key's banks.
    past = call(secured, "GET", "/v1/default/banks", AGENT, params={"offset": 1000}).json()
    assert past["banks"] == [] and past["total"] == len(ids)


def test_a_bank_limited_key_sees_other_banks_chunks_as_missing(secured: RunningServer) -> None:
    mine, theirs = f"team-{RUN}-chunks", f"other-{RUN}-chunks"
    for key, bank in ((AGENT, mine), (ADMIN, theirs)):
        assert retain(secured, key, bank, f"Chunk text for {bank}.").status_code == 200
    chunk_of = {}
    for bank in (mine, theirs):
        docs = call(secured, "GET", f"/v1/default/banks/{bank}/documents", ADMIN).json()["items"]
        chunks = call(secured, "GET", f"/v1/default/banks/{bank}/documents/{docs[0]['id']}/chunks", ADMIN).json()
        chunk_of[bank] = chunks["items"][0]["chunk_id"]
    assert call(secured, "GET", f"/v1/default/chunks/{chunk_of[mine]}", AGENT).status_code == 200
    assert call(secured, "GET", f"/v1/default/chunks/{chunk_of[theirs]}", AGENT).status_code == 404
    assert call(secured, "GET", f"/v1/default/chunks/{chunk_of[theirs]}", ADMIN).status_code == 200


def test_a_bank_limited_key_is_refused_outside_banks(secured: RunningServer) -> None:
    assert call(secured, "GET", "/version", AGENT).status_code == 200
    assert call(secured, "GET", "/openapi.json", AGENT).status_code == 200
    for path in ("/metrics", "/v1/default/unknown"):
        response = call(secured, "GET", path, AGENT)
        assert response.status_code == 403, path
        assert "not within one bank" in response.json()["detail"]


def test_a_bank_limited_key_reaches_mcp_for_its_banks_only(secured: RunningServer) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {AGENT}"}

    def mcp(path: str, **extra: str) -> httpx.Response:
        return httpx.post(secured.url + path, json=message, headers={**headers, **extra}, timeout=60)

    assert mcp(f"/mcp/team-{RUN}-mcp/").status_code == 200
    assert mcp("/mcp", **{"X-Bank-Id": f"solo.{RUN}"}).status_code == 200
    assert mcp(f"/mcp/other-{RUN}/").status_code == 403
    assert mcp("/mcp", **{"X-Bank-Id": f"other-{RUN}"}).status_code == 403
    everywhere = mcp("/mcp")  # the multi-bank endpoint's tools take any bank_id
    assert everywhere.status_code == 403
    assert "not within one bank" in everywhere.json()["detail"]
    assert httpx.post(secured.url + "/mcp", json=message, timeout=60,
                      headers={**headers, "Authorization": f"Bearer {ADMIN}"}).status_code == 200


def test_the_official_client_sends_its_api_key(secured: RunningServer) -> None:
    from hindsight_client import Hindsight
    from hindsight_client_api.exceptions import UnauthorizedException

    bank = f"team-{RUN}-client"

    def session() -> tuple[list[str], int]:
        with Hindsight(base_url=secured.url, api_key=AGENT, timeout=60) as client:
            client.retain(bank, "Grace repairs the tram lines on Fridays.")
            texts = [m.text for m in client.recall(bank, "Who repairs the tram lines?").results]
        with Hindsight(base_url=secured.url, timeout=60) as anonymous:
            try:
                anonymous.recall(bank, "tram")
            except UnauthorizedException as exc:
                return texts, exc.status
        return texts, 200

    with concurrent.futures.ThreadPoolExecutor(1) as thread:  # the client wants an event loop of its own
        texts, anonymous_status = thread.submit(session).result()
    assert any("tram lines" in text for text in texts)
    assert anonymous_status == 401


def test_the_cli_sends_engram_api_key(secured: RunningServer) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    command = [sys.executable, "-m", "engram.cli", "--url", secured.url, "banks"]
    with_key = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env={**base, "ENGRAM_API_KEY": ADMIN})
    assert with_key.returncode == 0, with_key.stderr
    without = subprocess.run(command, capture_output=True, text=True, timeout=60, env=base)
    assert without.returncode != 0
    assert "wants an API key" in without.stderr and "ENGRAM_API_KEY" in without.stderr


def test_no_keys_configured_means_no_auth(server: RunningServer) -> None:
    assert httpx.get(server.url + "/v1/default/banks").status_code == 200
    assert httpx.get(server.url + "/version", headers={"Authorization": "Bearer anything"}).status_code == 200
