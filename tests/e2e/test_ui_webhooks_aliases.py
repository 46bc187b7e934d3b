"""The control plane's webhooks page (add one, see its deliveries, disable, delete) and the aliases
section of a bank's overview (add, make primary, remove), in headless Chromium."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import RunningServer, start_server
from tests.support.webhook_receiver import WebhookReceiver


@pytest.fixture(scope="module")
def allowing(pg_dsn: str) -> Iterator[RunningServer]:
    from tests.conftest import separate_database

    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, {"ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"}, name="ui-webhooks")
        yield running
        running.stop()


def test_add_a_webhook_and_watch_its_delivery(ui, allowing: RunningServer) -> None:
    bank_id = f"ui-{uuid.uuid4().hex[:8]}"
    receiver = WebhookReceiver()
    try:
        with allowing.client() as http:
            http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
        view = ui(allowing)
        page = view.open(f"#/b/{bank_id}/webhooks")
        page.fill("#webhook-form input[name=url]", receiver.url)
        page.fill("#webhook-form input[name=secret]", "ui-secret")
        page.click("#webhook-form button[type=submit]")
        page.locator("#webhooks-message", has_text="Webhook added.").wait_for()
        card = page.locator("section.webhook")
        assert receiver.url in card.locator("h2").inner_text() and "signed" in card.inner_text()

        with allowing.client() as http:
            http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Wes paints boats."}],
                                                                   "async": True}).raise_for_status()
        row = card.locator("table.deliveries tr[data-status=delivered]")
        row.wait_for(timeout=20_000)
        cells = row.locator("td").all_inner_texts()
        assert cells[:4] == ["retain.completed", "delivered", "1", "200"] and cells[4].endswith(" ms")
        assert receiver.requests and "x-hindsight-signature" in receiver.requests[0].headers
        view.screenshot("20-webhooks")

        card.locator("button.toggle").click()
        page.locator("#webhooks-message", has_text="Webhook disabled.").wait_for()
        card.locator("h2", has_text="disabled").wait_for()
        card.locator("button.delete").click()
        page.locator("#webhooks-list p.empty").wait_for()
    finally:
        receiver.close()


def test_aliases_on_the_bank_overview(ui, allowing: RunningServer) -> None:
    bank_id = f"ui-{uuid.uuid4().hex[:8]}"
    with allowing.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    view = ui(allowing, expected_http_errors=True)
    page = view.open(f"#/b/{bank_id}")
    page.locator("#aliases-list p.empty").wait_for()
    page.fill("#alias-form input[name=alias]", f"{bank_id}-nick")
    page.click("#alias-form button[type=submit]")
    item = page.locator(f"li[data-alias='{bank_id}-nick']")
    item.wait_for()
    item.locator("button.primary-toggle").click()
    item.locator(".badge.primary").wait_for()
    page.fill("#alias-form input[name=alias]", bank_id)  # the bank's own id: refused
    page.click("#alias-form button[type=submit]")
    page.locator("#aliases-message .error", has_text="already a bank").wait_for()
    view.screenshot("21-aliases")
    with allowing.client() as http:
        assert http.get(f"/v1/default/banks/{bank_id}/aliases").json()["aliases"] == [
            {"alias": f"{bank_id}-nick", "primary": True}]
    item.locator("button.remove").click()
    page.locator("#aliases-list p.empty").wait_for()
