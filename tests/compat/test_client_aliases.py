"""The official `hindsight-client==1.1.0` on bank aliases: add, list, promote, remove, and the
client's own retain and recall reaching the bank through an alias."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models.create_bank_alias_request import CreateBankAliasRequest
from hindsight_client_api.models.set_bank_alias_primary_request import SetBankAliasPrimaryRequest

from tests.compat.test_hindsight_client import ThreadedClient
from tests.conftest import RunningServer


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[ThreadedClient]:
    hindsight = ThreadedClient(server.url)
    yield hindsight
    hindsight.close()


def test_aliases_through_the_client(client: ThreadedClient, bank_id: str) -> None:
    client.create_bank(bank_id)
    alias = f"{bank_id}-legacy"
    created = client.run(client.banks.create_bank_alias(bank_id, CreateBankAliasRequest(alias=alias)))
    assert created.bank_id == bank_id and [(a.alias, a.primary) for a in created.aliases] == [(alias, False)]
    with pytest.raises(ApiException) as taken:
        client.run(client.banks.create_bank_alias(bank_id, CreateBankAliasRequest(alias=alias)))
    assert taken.value.status == 409

    client.retain(alias, "Kim restores old bicycles.")
    recalled = client.recall(bank_id, "Who restores bicycles?")
    assert any("bicycles" in r.text for r in recalled.results)
    assert any("bicycles" in r.text for r in client.recall(alias, "bicycles").results)

    promoted = client.run(client.banks.set_bank_alias_primary(bank_id, alias, SetBankAliasPrimaryRequest(primary=True)))
    assert [(a.alias, a.primary) for a in promoted.aliases] == [(alias, True)]
    listed = client.run(client.banks.list_bank_aliases(alias))
    assert listed.bank_id == bank_id
    left = client.run(client.banks.delete_bank_alias(bank_id, alias))
    assert left.aliases == []
    with pytest.raises(ApiException) as gone:
        client.run(client.banks.list_bank_aliases(alias))
    assert gone.value.status == 404
