"""The audit log: mutating requests recorded with who (the API key's id, never the key), bank, action,
route, status and duration; bodies bounded with secrets redacted; refusals recorded; reads only with
the setting; listing newest first with filters and paging, one entry, stats; retention."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, _admin, separate_database, start_server

BANKS = "/v1/default/banks"
ADMIN = "admin-" + uuid.uuid4().hex
LIMITED = "limited-" + uuid.uuid4().hex
AUDIT = {"ENGRAM_AUDIT_LOG_ENABLED": "true", "ENGRAM_API_KEYS": f"{ADMIN},{LIMITED}:team-*",
         "ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"}


@pytest.fixture(scope="module")
def audited(pg_dsn: str) -> Iterator[tuple[RunningServer, str]]:
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, AUDIT, name="audit")
        yield running, dsn
        running.stop()


def as_key(server: RunningServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def entries(http: httpx.Client, bank_id: str, **params: object) -> list[dict]:
    return http.get(f"{BANKS}/{bank_id}/audit-logs", params=params).json()["items"]


def test_mutations_are_recorded_with_secrets_redacted(audited: tuple[RunningServer, str]) -> None:
    server, _ = audited
    bank_id = f"team-{uuid.uuid4().hex[:8]}"
    with as_key(server, ADMIN) as admin, as_key(server, LIMITED) as limited:
        admin.put(f"{BANKS}/secret-bank", json={}).raise_for_status()
        limited.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        limited.post(f"{BANKS}/{bank_id}/webhooks", json={
            "url": "http://127.0.0.1:9/hook", "secret": "hook-secret-value",
            "http_config": {"headers": {"Authorization": "Bearer downstream-token"}}}).raise_for_status()
        limited.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "x" * 5000}]}).raise_for_status()
        limited.get(f"{BANKS}/{bank_id}/stats").raise_for_status()  # a read: not recorded by default
        assert limited.post(f"{BANKS}/secret-bank/memories", json={"items": [{"content": "no"}]}).status_code == 403

        listed = admin.get(f"{BANKS}/{bank_id}/audit-logs").json()
        assert [e["action"] for e in listed["items"]] == ["retain", "create_webhook", "create_or_update_bank"]
        assert listed["total"] == 3
        newest = listed["items"][0]
        key_id = newest["metadata"]["api_key_id"]
        assert key_id.startswith("key-") and newest["transport"] == "http" and newest["duration_ms"] >= 0
        assert newest["metadata"]["route"] == "/v1/default/banks/{bank_id}/memories"
        assert newest["metadata"]["status_code"] == 200

        hook = admin.get(f"{BANKS}/{bank_id}/audit-logs/{listed['items'][1]['id']}").json()
        assert hook["request"]["body"]["secret"] == "[redacted]"
        assert hook["request"]["body"]["http_config"]["headers"]["Authorization"] == "[redacted]"
        assert hook["response"]["body"]["url"] == "http://127.0.0.1:9/hook"
        retain = admin.get(f"{BANKS}/{bank_id}/audit-logs/{newest['id']}").json()
        content = retain["request"]["body"]["items"][0]["content"]
        assert len(content) < 2100 and content.endswith("[3000 more characters]")
        everything = json.dumps([admin.get(f"{BANKS}/{bank_id}/audit-logs/{e['id']}").json() for e in listed["items"]])
        for secret in ("hook-secret-value", "downstream-token", LIMITED, ADMIN):
            assert secret not in everything

        refused = entries(admin, "secret-bank", action="retain")
        assert [(e["action"], e["metadata"]["status_code"], e["metadata"]["api_key_id"]) for e in refused] == [
            ("retain", 403, key_id)]


def test_filters_paging_and_stats(audited: tuple[RunningServer, str]) -> None:
    server, _ = audited
    bank_id = f"team-{uuid.uuid4().hex[:8]}"
    with as_key(server, ADMIN) as admin:
        admin.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        for n in range(3):
            admin.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": f"Note number {n}."}]})
        admin.patch(f"{BANKS}/{bank_id}/config", json={"updates": {"retain_mission": "notes"}})
        assert [e["action"] for e in entries(admin, bank_id, action="retain")] == ["retain"] * 3
        first, second = entries(admin, bank_id, limit=2), entries(admin, bank_id, limit=2, offset=2)
        assert [e["action"] for e in first + second] == ["update_config", "retain", "retain", "retain"]
        assert first[0]["started_at"] >= first[1]["started_at"] >= second[0]["started_at"]
        assert entries(admin, bank_id, transport="mcp") == []
        assert entries(admin, bank_id, start_date="2999-01-01") == []
        bad = admin.get(f"{BANKS}/{bank_id}/audit-logs", params={"start_date": "yesterday"})
        assert bad.status_code == 400 and "start_date" in bad.json()["detail"]
        stats = admin.get(f"{BANKS}/{bank_id}/audit-logs/stats", params={"period": "1h"}).json()
        assert stats["trunc"] == "minute" and len(stats["buckets"]) == 60
        assert sum(b["total"] for b in stats["buckets"]) == 5
        assert sum(b["actions"].get("retain", 0) for b in stats["buckets"]) == 3
        assert admin.get(f"{BANKS}/{bank_id}/audit-logs/{uuid.uuid4()}").status_code == 404


def test_reads_by_setting_and_retention(pg_dsn: str) -> None:
    with separate_database(pg_dsn) as dsn:
        env = {"ENGRAM_AUDIT_LOG_ENABLED": "true", "ENGRAM_AUDIT_LOG_READS": "true",
               "ENGRAM_AUDIT_LOG_RETENTION_DAYS": "30"}
        first = start_server(dsn, env, name="audit-reads")
        try:
            with first.client() as http:
                http.put(f"{BANKS}/b1", json={}).raise_for_status()
                http.get(f"{BANKS}/b1/stats").raise_for_status()
                assert [e["action"] for e in entries(http, "b1")] == ["get_stats", "create_or_update_bank"]
        finally:
            first.stop()
        _admin(dsn, "UPDATE audit_logs SET started_at = now() - interval '40 days' WHERE action = 'get_stats'")
        second = start_server(dsn, env, name="audit-retention")
        try:
            with second.client() as http:
                http.patch(f"{BANKS}/b1/config", json={"updates": {"retain_mission": "x"}}).raise_for_status()
                assert [e["action"] for e in entries(http, "b1")] == ["update_config", "create_or_update_bank"]
        finally:
            second.stop()


def test_off_by_default(http: httpx.Client, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    assert http.get(f"{BANKS}/{bank_id}/audit-logs").json()["total"] == 0
    assert http.get("/version").json()["features"]["audit_log"] is False
