"""Fixtures shared by the tests of requests made while an import holds a bank."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from tests.conftest import RunningServer
from tests.support.import_holders import IMPORTING, begin_merge, begin_restore, server_waiting


@pytest.fixture
async def import_under_way(isolated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """An import merging into the bank IMPORTING, made empty beforehand (`import_holders.begin_merge`)."""
    setup = await asyncpg.connect(isolated_dsn)
    await setup.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", IMPORTING)
    await setup.close()
    holder = await begin_merge(isolated_dsn)
    try:
        yield holder
    finally:
        if not holder.is_closed():
            await holder.close()  # rolled back


@pytest.fixture
async def restore_under_way(isolated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A restore creating the bank IMPORTING (`import_holders.begin_restore`)."""
    holder = await begin_restore(isolated_dsn)
    try:
        yield holder
    finally:
        if not holder.is_closed():
            await holder.close()  # uncommitted: rolled back


@pytest.fixture
def patient_server(isolated_dsn: str) -> Iterator[RunningServer]:
    """A server whose requests wait the default minute for an import."""
    yield from server_waiting(isolated_dsn, "during-import")


@pytest.fixture
def impatient_server(isolated_dsn: str) -> Iterator[RunningServer]:
    """A server whose requests wait one second for an import."""
    yield from server_waiting(isolated_dsn, "import-wait", {"ENGRAM_IMPORT_WAIT_SECONDS": "1"})
