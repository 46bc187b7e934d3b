"""Webhooks: managing them, signed deliveries to a receiver on 127.0.0.1 (allowed by the setting
tests turn on), retries after a 500 and a timeout, deliveries surviving a server restart, and the
SSRF guard refusing loopback and private targets when the setting is off."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, free_port, start_server
from tests.support.database import query
from tests.support.waiting import settle, wait_for
from tests.support.webhook_receiver import WebhookReceiver

BANKS = "/v1/default/banks"
SECRET = "s3cret-for-tests"
ALLOW = {"ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true", "ENGRAM_WEBHOOK_RETRY_BASE_SECONDS": "0.3"}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    running = WebhookReceiver()
    yield running
    running.close()


@pytest.fixture
def allowing(isolated_dsn: str) -> Iterator[RunningServer]:
    running = start_server(isolated_dsn, ALLOW, name="webhooks")
    yield running
    running.stop()


def retain_async(http: httpx.Client, bank_id: str, text: str) -> str:
    answer = http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": text}], "async": True})
    answer.raise_for_status()
    return answer.json()["operation_id"]


def deliveries(http: httpx.Client, bank_id: str, webhook_id: str) -> list[dict]:
    return http.get(f"{BANKS}/{bank_id}/webhooks/{webhook_id}/deliveries").json()["items"]


def test_signed_delivery_retried_after_a_500(allowing: RunningServer, receiver: WebhookReceiver,
                                             bank_id: str) -> None:
    receiver.statuses.append(500)
    with allowing.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        hook = http.post(f"{BANKS}/{bank_id}/webhooks", json={
            "url": receiver.url, "secret": SECRET, "event_types": ["retain.completed"],
            "http_config": {"headers": {"X-Team": "ops", "X-Hindsight-Event": "forged"}}}).json()
        operation_id = retain_async(http, bank_id, "Lena tunes pianos in Graz.")
        first, second = receiver.wait_for(2)
        for request in (first, second):
            expected = "sha256=" + hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
            assert request.headers["x-hindsight-signature"] == expected == request.headers["x-hub-signature-256"]
            assert request.headers["x-hindsight-event"] == "retain.completed", "a custom header cannot forge it"
            assert request.headers["x-team"] == "ops"
        assert first.body == second.body, "a retry sends the same event"
        assert second.at - first.at >= 0.3, "the retry waited for its backoff"
        event = json.loads(second.body)
        assert (event["event"], event["bank_id"], event["operation_id"], event["status"]) == (
            "retain.completed", bank_id, operation_id, "completed")
        assert event["data"]["memory_unit_count"] >= 1

        (delivery,) = wait_for(lambda: [d for d in deliveries(http, bank_id, hook["id"]) if d["status"] == "delivered"],
                               "the delivery to be recorded")
        assert delivery["attempts"] == 2 and delivery["last_response_status"] == 200
        assert delivery["last_error"] is None and delivery["last_latency_ms"] > 0
        assert delivery["event_id"] == event["event_id"] == second.headers["x-hindsight-event-id"]


def test_timeouts_are_retried_until_the_attempts_run_out(isolated_dsn: str, receiver: WebhookReceiver,
                                                         bank_id: str) -> None:
    receiver.delay = 1.5
    running = start_server(isolated_dsn, {**ALLOW, "ENGRAM_WEBHOOK_MAX_ATTEMPTS": "2"}, name="webhooks-timeout")
    try:
        with running.client() as http:
            http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
            hook = http.post(f"{BANKS}/{bank_id}/webhooks", json={
                "url": receiver.url, "event_types": ["retain.completed"], "http_config": {"timeout_seconds": 1}}).json()
            retain_async(http, bank_id, "Omar sails on Lake Constance.")
            settle(http, bank_id)
            (failed,) = wait_for(lambda: [d for d in deliveries(http, bank_id, hook["id"]) if d["status"] == "failed"],
                                 "the delivery to fail", timeout=30)
            assert failed["attempts"] == 2 and "timed out" in failed["last_error"]
            assert len(receiver.requests) == 2
            assert "x-hindsight-signature" not in receiver.requests[0].headers, "no secret, no signature"
    finally:
        running.stop()


def test_a_pending_delivery_survives_a_restart(isolated_dsn: str, bank_id: str) -> None:
    port = free_port()  # nothing listens there yet: the first attempt is refused
    running = start_server(isolated_dsn, ALLOW, name="webhooks-before")
    try:
        with running.client() as http:
            http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
            hook = http.post(f"{BANKS}/{bank_id}/webhooks", json={
                "url": f"http://127.0.0.1:{port}/hook", "event_types": ["retain.completed"]}).json()
            retain_async(http, bank_id, "Ada restores harpsichords.")
            wait_for(lambda: [d for d in deliveries(http, bank_id, hook["id"]) if d["attempts"] >= 1],
                     "a first, refused attempt")
    finally:
        running.stop()
    receiver = WebhookReceiver(port)
    restarted = start_server(isolated_dsn, ALLOW, name="webhooks-after")
    try:
        (request,) = receiver.wait_for(1)
        assert json.loads(request.body)["event"] == "retain.completed"
        with restarted.client() as http:
            (delivery,) = wait_for(lambda: [d for d in deliveries(http, bank_id, hook["id"])
                                            if d["status"] == "delivered"], "the delivery after the restart")
            assert delivery["attempts"] >= 2
    finally:
        restarted.stop()
        receiver.close()


def test_manage_webhooks(allowing: RunningServer, receiver: WebhookReceiver, bank_id: str) -> None:
    with allowing.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        created = http.post(f"{BANKS}/{bank_id}/webhooks", json={"url": receiver.url, "secret": SECRET})
        assert created.status_code == 201
        hook = created.json()
        assert hook["event_types"] == ["consolidation.completed"] and hook["enabled"] is True
        assert hook["secret"] is None and hook["has_secret"] is True
        assert hook["http_config"] == {"method": "POST", "timeout_seconds": 30, "headers": {}, "params": {}}
        listed = http.get(f"{BANKS}/{bank_id}/webhooks").json()
        assert [w["id"] for w in listed["items"]] == [hook["id"]] and listed["total"] == 1

        bad = http.patch(f"{BANKS}/{bank_id}/webhooks/{hook['id']}", json={"event_types": ["retain.finished"]})
        assert bad.status_code == 400 and "event_types" in bad.json()["detail"]
        changed = http.patch(f"{BANKS}/{bank_id}/webhooks/{hook['id']}", json={
            "event_types": ["retain.completed"], "enabled": False, "secret": None}).json()
        assert changed["event_types"] == ["retain.completed"]
        assert (changed["enabled"], changed["has_secret"]) == (False, False)
        retain_async(http, bank_id, "A disabled webhook hears nothing.")
        settle(http, bank_id)
        assert deliveries(http, bank_id, hook["id"]) == [] and receiver.requests == []

        assert http.get(f"{BANKS}/{bank_id}/webhooks/not-a-uuid/deliveries").status_code == 404
        assert http.delete(f"{BANKS}/{bank_id}/webhooks/{hook['id']}").json()["success"] is True
        assert http.delete(f"{BANKS}/{bank_id}/webhooks/{hook['id']}").status_code == 404
        assert http.get(f"{BANKS}/{bank_id}/webhooks").json()["total"] == 0


def test_ssrf_guard_refuses_internal_targets(http: httpx.Client, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    for url in ("http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/", "http://169.254.169.254/",
                "http://[::1]/", "http://[::ffff:127.0.0.1]/"):
        refused = http.post(f"{BANKS}/{bank_id}/webhooks", json={"url": url})
        assert refused.status_code == 400, url
        assert "url" in refused.json()["detail"] and "ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS" in refused.json()["detail"]
    for url in ("ftp://example.com/", "file:///etc/passwd", "http:///nohost", "http://[::1/", "http://a..b/",
                "http://example.com:99999/"):
        refused = http.post(f"{BANKS}/{bank_id}/webhooks", json={"url": url})
        assert refused.status_code == 400 and "url" in refused.json()["detail"], url
    assert http.get(f"{BANKS}/{bank_id}/webhooks").json()["total"] == 0


def test_a_sync_retain_fires_its_event_after_answering(allowing: RunningServer, receiver: WebhookReceiver,
                                                       bank_id: str) -> None:
    receiver.delay = 3  # a slow receiver never holds up the request that caused the event
    with allowing.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        http.post(f"{BANKS}/{bank_id}/webhooks", json={"url": receiver.url, "event_types": ["retain.completed"]})
        started = time.monotonic()
        http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "Pia bakes rye bread.",
                                                                  "document_id": "bread"}]}).raise_for_status()
        assert time.monotonic() - started < receiver.delay
        (request,) = receiver.wait_for(1)
        event = json.loads(request.body)
        assert (event["operation_id"], event["data"]["document_id"]) == (None, "bread")
        assert event["data"]["memory_unit_count"] >= 1


def test_a_sync_retain_writes_its_event_with_its_facts_or_not_at_all(
    allowing: RunningServer, isolated_dsn: str, bank_id: str,
) -> None:
    """The event of a sync retain is written in the retain's own transaction: when writing it fails,
    the retain fails whole (nothing kept for the caller to store twice on a retry), and once writing
    works again the retain stores its facts and its event together. Written after the facts'
    transaction committed, the failure answered an error for facts that were kept."""
    query(isolated_dsn, """
        CREATE FUNCTION refuse_deliveries() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'deliveries refused by the test'; END $$""")
    query(isolated_dsn, "CREATE TRIGGER refuse BEFORE INSERT ON webhook_deliveries"
                        " FOR EACH ROW EXECUTE FUNCTION refuse_deliveries()")
    item = {"items": [{"content": "Pia bakes rye bread.", "document_id": "bread"}]}
    with allowing.client() as http:
        http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
        http.post(f"{BANKS}/{bank_id}/webhooks", json={"url": "http://127.0.0.1:9/",
                                                      "event_types": ["retain.completed"]}).raise_for_status()
        failed = http.post(f"{BANKS}/{bank_id}/memories", json=item)
        assert failed.status_code >= 500, failed.text
        assert http.get(f"{BANKS}/{bank_id}/memories/list").json()["total"] == 0, "facts kept by a failed retain"
        assert http.get(f"{BANKS}/{bank_id}/documents/bread").status_code == 404

        query(isolated_dsn, "DROP TRIGGER refuse ON webhook_deliveries")
        http.post(f"{BANKS}/{bank_id}/memories", json=item).raise_for_status()
        facts = http.get(f"{BANKS}/{bank_id}/memories/list").json()["total"]
    (delivery,) = query(isolated_dsn, "SELECT body FROM webhook_deliveries WHERE bank_id = $1", bank_id)
    assert facts >= 1 and json.loads(delivery["body"])["data"]["memory_unit_count"] == facts
