"""The official `hindsight-client==1.1.0` on webhooks: create, list, update, list deliveries (after a
real delivery to a receiver on 127.0.0.1) and delete."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models.create_webhook_request import CreateWebhookRequest
from hindsight_client_api.models.update_webhook_request import UpdateWebhookRequest

from tests.compat.test_hindsight_client import ThreadedClient
from tests.conftest import RunningServer, start_server
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver


@pytest.fixture
def client(isolated_dsn: str) -> Iterator[ThreadedClient]:
    running: RunningServer = start_server(isolated_dsn, {"ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"},
                                          name="webhooks-client")
    hindsight = ThreadedClient(running.url)
    yield hindsight
    hindsight.close()
    running.stop()


def test_webhooks_through_the_client(client: ThreadedClient, bank_id: str) -> None:
    receiver = WebhookReceiver()
    try:
        client.create_bank(bank_id)
        hook = client.run(client.webhooks.create_webhook(bank_id, CreateWebhookRequest(
            url=receiver.url, secret="shh", event_types=["retain.completed"])))
        assert hook.bank_id == bank_id and hook.event_types == ["retain.completed"] and hook.secret is None
        listed = client.run(client.webhooks.list_webhooks(bank_id))
        assert [w.id for w in listed.items] == [hook.id] and listed.total == 1

        client.retain(bank_id, "Uma carves wooden spoons.", retain_async=True)
        (request,) = receiver.wait_for(1)
        assert json.loads(request.body)["event"] == "retain.completed"
        page = wait_for(lambda: [d for d in client.run(client.webhooks.list_webhook_deliveries(bank_id, hook.id)).items
                                 if d.status == "delivered"], "the delivery to be recorded")
        assert [(d.event_type, d.attempts, d.last_response_status) for d in page] == [("retain.completed", 1, 200)]

        updated = client.run(client.webhooks.update_webhook(bank_id, hook.id, UpdateWebhookRequest(enabled=False)))
        assert updated.enabled is False and updated.url == receiver.url
        assert client.run(client.webhooks.delete_webhook(bank_id, hook.id)).success is True
        with pytest.raises(ApiException) as gone:
            client.run(client.webhooks.list_webhook_deliveries(bank_id, hook.id))
        assert gone.value.status == 404
    finally:
        receiver.close()
