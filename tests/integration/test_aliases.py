"""Bank aliases: managing them, every route (HTTP and MCP) reaching the bank through one, and API-key
bank patterns applying to the bank an alias names, so an alias never widens what a key reaches."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, separate_database, start_server
from tests.integration.test_mcp import call, connect, texts

BANKS = "/v1/default/banks"
ADMIN = "admin-" + uuid.uuid4().hex
LIMITED = "limited-" + uuid.uuid4().hex


def test_manage_aliases(http: httpx.Client, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    other = f"{bank_id}-other"
    http.put(f"{BANKS}/{other}", json={}).raise_for_status()
    created = http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": f"{bank_id}-a"})
    assert created.status_code == 201
    assert created.json() == {"bank_id": bank_id, "aliases": [{"alias": f"{bank_id}-a", "primary": False}]}
    both = http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": f"{bank_id}-b", "primary": True}).json()
    assert both["aliases"] == [{"alias": f"{bank_id}-b", "primary": True}, {"alias": f"{bank_id}-a", "primary": False}]

    assert http.post(f"{BANKS}/{other}/aliases", json={"alias": f"{bank_id}-a"}).status_code == 409
    assert http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": other}).status_code == 409, "names a bank"
    for bad in ("", "a/b", "_hidden", "tab\there", " padded"):
        refused = http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": bad})
        assert refused.status_code == 400 and "alias" in refused.json()["detail"], bad
    assert http.post(f"{BANKS}/nope-{bank_id}/aliases", json={"alias": f"{bank_id}-c"}).status_code == 404

    promoted = http.patch(f"{BANKS}/{bank_id}/aliases/{bank_id}-a", json={"primary": True}).json()
    assert promoted["aliases"] == [{"alias": f"{bank_id}-a", "primary": True},
                                   {"alias": f"{bank_id}-b", "primary": False}]
    listed = http.get(BANKS, params={"q": bank_id}).json()["banks"]
    assert {b["bank_id"]: b["display_alias"] for b in listed} == {bank_id: f"{bank_id}-a", other: None}
    demoted = http.patch(f"{BANKS}/{bank_id}/aliases/{bank_id}-a", json={"primary": False}).json()
    assert not any(a["primary"] for a in demoted["aliases"])
    assert http.patch(f"{BANKS}/{bank_id}/aliases/missing", json={"primary": True}).status_code == 404
    assert http.patch(f"{BANKS}/{other}/aliases/{bank_id}-a", json={"primary": True}).status_code == 404

    left = http.delete(f"{BANKS}/{bank_id}/aliases/{bank_id}-b").json()
    assert [a["alias"] for a in left["aliases"]] == [f"{bank_id}-a"]
    assert http.delete(f"{BANKS}/{bank_id}/aliases/{bank_id}-b").status_code == 404
    assert http.get(f"{BANKS}/{bank_id}-b/stats").status_code == 404, "a removed alias reaches nothing"
    http.delete(f"{BANKS}/{bank_id}").raise_for_status()
    assert http.get(f"{BANKS}/{bank_id}-a/stats").status_code == 404, "deleting the bank removes its aliases"


def test_every_route_takes_an_alias(http: httpx.Client, bank_id: str) -> None:
    alias = f"nick {bank_id}é"  # any character a bank id may hold, percent-encoded in the path
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": alias}).raise_for_status()
    through = f"{BANKS}/{httpx.URL('/' + alias).raw_path.decode()[1:]}"
    retained = http.post(f"{through}/memories", json={"items": [{"content": "Iris repairs clocks in Porto."}]})
    assert retained.status_code == 200 and retained.json()["bank_id"] == bank_id
    recalled = http.post(f"{BANKS}/{bank_id}/memories/recall", json={"query": "Who repairs clocks?"}).json()
    assert any("clocks" in r["text"] for r in recalled["results"])
    assert http.get(f"{through}/stats").json()["bank_id"] == bank_id
    assert http.get(f"{through}/memories/list").json()["total"] == http.get(
        f"{BANKS}/{bank_id}/memories/list").json()["total"] > 0
    http.patch(f"{through}/config", json={"updates": {"retain_mission": "clocks"}}).raise_for_status()
    assert http.get(f"{BANKS}/{bank_id}/config").json()["overrides"]["retain_mission"] == "clocks"
    assert http.get(f"{through}/aliases").json()["bank_id"] == bank_id
    names = [b["bank_id"] for b in http.get(BANKS, params={"q": bank_id}).json()["banks"]]
    assert names == [bank_id], "no bank was created under the alias"


async def test_mcp_takes_an_alias(server: RunningServer, bank_id: str) -> None:
    alias = f"{bank_id}-mcp"
    with server.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        http.post(f"{BANKS}/{bank_id}/aliases", json={"alias": alias}).raise_for_status()
    async with connect(f"{server.url}/mcp/{alias}/") as session:
        await call(session, "sync_retain", content="Jon keeps bees in Lyon.")
    async with connect(server.url + "/mcp", {"X-Bank-Id": alias}) as session:
        assert any("bees" in text for text in texts(await call(session, "recall", query="Who keeps bees?")))
    async with connect(server.url + "/mcp") as session:
        assert any("bees" in text for text in texts(await call(session, "recall", bank_id=alias, query="bees")))
        stats = await call(session, "get_bank_stats", bank_id=alias)
        assert stats["bank_id"] == bank_id


@pytest.fixture(scope="module")
def secured(pg_dsn: str) -> Iterator[RunningServer]:
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, {"ENGRAM_API_KEYS": f"{ADMIN},{LIMITED}:mine-*"}, name="aliases-auth")
        yield running
        running.stop()


def as_key(server: RunningServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


async def test_an_alias_never_widens_a_bank_limited_key(secured: RunningServer) -> None:
    with as_key(secured, ADMIN) as admin, as_key(secured, LIMITED) as limited:
        admin.put(f"{BANKS}/secret", json={}).raise_for_status()
        admin.post(f"{BANKS}/secret/memories", json={"items": [{"content": "The vault code is 4711."}]})
        admin.put(f"{BANKS}/mine-1", json={}).raise_for_status()
        # An alias inside the key's patterns that names a bank outside them:
        admin.post(f"{BANKS}/secret/aliases", json={"alias": "mine-trap"}).raise_for_status()
        for method, path in (("POST", "/memories/recall"), ("GET", "/memories/list"), ("GET", "/stats"),
                             ("GET", "/aliases"), ("DELETE", "/aliases/mine-trap")):
            answer = limited.request(method, f"{BANKS}/mine-trap{path}", json={"query": "vault code"})
            assert answer.status_code == 403 and "secret" in answer.json()["detail"], (method, path)
        assert limited.get(f"{BANKS}/mine-1/stats").status_code == 200
        # An alias outside the key's patterns that names one of its banks reaches that bank, and only it.
        admin.post(f"{BANKS}/mine-1/aliases", json={"alias": "elsewhere"}).raise_for_status()
        assert limited.get(f"{BANKS}/elsewhere/stats").json()["bank_id"] == "mine-1"
        # The key may not claim a name its patterns do not cover.
        squat = limited.post(f"{BANKS}/mine-1/aliases", json={"alias": "someone-else"})
        assert squat.status_code == 403
        assert limited.post(f"{BANKS}/mine-1/aliases", json={"alias": "mine-2"}).status_code == 201
        assert admin.get(f"{BANKS}/secret/aliases").json()["aliases"] == [{"alias": "mine-trap", "primary": False}]

    refused = httpx.post(f"{secured.url}/mcp/mine-trap/", headers={"Authorization": f"Bearer {LIMITED}"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert refused.status_code == 403
    refused = httpx.post(f"{secured.url}/mcp", headers={"Authorization": f"Bearer {LIMITED}", "X-Bank-Id": "mine-trap"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert refused.status_code == 403
