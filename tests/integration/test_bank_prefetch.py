"""A recall's or a retain's alias lookup reads the bank's row in the same round trip, and the request's
first read of the bank's settings takes it from there (`engram.bank_prefetch`): one round trip fewer
on the way of each. Shown here by changing the settings in between: the first read still sees them as
the lookup read them (no second query), a later one reads them again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from engram import bank_prefetch
from engram.api.alias_resolution import BankAliasResolution, resolve_scope
from engram.api.app import close_services, open_services
from engram.services import Services
from engram.settings import Settings
from engram.store import aliases


@pytest.fixture
async def services(isolated_dsn: str) -> AsyncIterator[Services]:
    opened = await open_services(Settings(database_url=isolated_dsn, worker_enabled=False))
    try:
        await opened.pool.execute("INSERT INTO banks (bank_id, name, config) VALUES ('shelf', 'shelf', $1)",
                                  {"recall_budget_fixed_mid": 7})
        async with opened.pool.acquire() as conn:
            await aliases.create_alias(conn, "shelf", "books", primary=False)
        yield opened
    finally:
        await close_services(opened)


def request(services: Services, method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
            "app": SimpleNamespace(state=SimpleNamespace(services=services))}


async def set_budget(services: Services, mid: int) -> None:
    await services.pool.execute("UPDATE banks SET config = $1 WHERE bank_id = 'shelf'",
                                {"recall_budget_fixed_mid": mid})


@pytest.mark.parametrize("route", ["/memories/recall", "/memories"])
async def test_a_recall_or_retain_takes_the_settings_its_alias_lookup_read(services: Services, route: str) -> None:
    read = services.existing_bank_config if route.endswith("recall") else services.bank_config
    seen: list[Any] = []

    async def handler(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await set_budget(services, 9)  # after the lookup: the first read below does not ask again
        seen.append((await read("shelf"))["recall_budget_fixed_mid"])
        seen.append((await read("shelf"))["recall_budget_fixed_mid"])  # taken once: a second read asks
        seen.append(await services.existing_bank_config("nowhere"))

    await BankAliasResolution(handler)(request(services, "POST", f"/v1/default/banks/books{route}"), None, None)
    assert seen == [f"/v1/default/banks/shelf{route}", 7, 9, None]

    await set_budget(services, 7)  # once the request is over, nothing is left to take
    assert (await read("shelf"))["recall_budget_fixed_mid"] == 7


async def test_an_unknown_bank_is_known_to_be_missing_without_asking_again(services: Services) -> None:
    prefetched = await resolve_scope(request(services, "POST", "/v1/default/banks/nowhere/memories/recall"))
    assert prefetched is not None and not prefetched.exists
    await services.pool.execute("INSERT INTO banks (bank_id, name) VALUES ('nowhere', 'nowhere')")
    token = bank_prefetch.offer(prefetched)
    try:
        assert await services.existing_bank_config("nowhere") is None  # as the lookup found it
        assert await services.existing_bank_config("nowhere") is not None
    finally:
        bank_prefetch.withdraw(token)


async def test_other_routes_only_resolve_the_alias(services: Services) -> None:
    for method, route in (("GET", "/config"), ("POST", "/memories/list"), ("GET", "/memories/recall")):
        scope = request(services, method, f"/v1/default/banks/books{route}")
        assert await resolve_scope(scope) is None
        assert scope["path"] == f"/v1/default/banks/shelf{route}"
