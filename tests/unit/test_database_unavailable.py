"""Which errors mean "the database is gone, retry later" (a 503, a retryable failed operation) and which
are bugs (a 500): asyncpg reports a connection lost mid-transaction as an InterfaceError."""

from __future__ import annotations

import asyncpg
import pytest

from engram.store.pool import is_unavailable


def raised_while_handling(first: BaseException, second: BaseException) -> BaseException:
    try:
        try:
            raise first
        except BaseException:
            raise second  # noqa: B904 - asyncpg's rollback raises like this, with the first as context
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("error", [
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.CannotConnectNowError("the database system is shutting down"),
    asyncpg.InterfaceError("cannot call Transaction.rollback(): the underlying connection is closed"),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.InterfaceError("pool is closing"),
    raised_while_handling(asyncpg.exceptions.AdminShutdownError("terminating connection"),
                          asyncpg.InterfaceError("cannot perform operation: another operation is in progress")),
])
def test_a_lost_connection_or_pool_is_unavailable(error: BaseException) -> None:
    assert is_unavailable(error)


@pytest.mark.parametrize("error", [
    asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    asyncpg.InterfaceError("the server expects 2 arguments for this query, 1 was passed"),
    asyncpg.exceptions.RaiseError("storage quota exceeded"),
    raised_while_handling(asyncpg.exceptions.RaiseError("boom"), ValueError("unrelated")),
    OSError("disk full"),  # not raised by asyncpg
])
def test_misuse_and_other_errors_are_not(error: BaseException) -> None:
    assert not is_unavailable(error)
