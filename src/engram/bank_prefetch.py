"""A bank's settings read in the round trip that resolves its alias, for the request that reads them first.

Every request naming a bank has its alias looked up before anything else (`api.alias_resolution`);
recall and retain then read the bank's settings (`Services.existing_bank_config`, `bank_config`) as
their first step: two round trips in a row, on the way of every recall and every sync retain. For
those two routes the alias lookup also reads the bank's row (`store.aliases.resolve_with_config`), and
the request's first read of that bank's settings takes it from here instead of asking again.

Taken once: a later read in the same request (a retain planned again after a conflict, a handler that
changed the settings and reads them back) goes to the database. The row is read a moment before the
handler would have read it itself, as if the request had come in that much earlier."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any


@dataclass
class PrefetchedBank:
    bank_id: str
    exists: bool
    overrides: dict[str, Any] | None  # the bank's own settings (its `config` column), when it exists
    taken: bool = False


_prefetched: contextvars.ContextVar[PrefetchedBank | None] = contextvars.ContextVar("engram_prefetched_bank",
                                                                                    default=None)


def offer(bank: PrefetchedBank) -> contextvars.Token[PrefetchedBank | None]:
    """Make `bank` the current request's prefetched bank (until `withdraw` with the token returned)."""
    return _prefetched.set(bank)


def withdraw(token: contextvars.Token[PrefetchedBank | None]) -> None:
    _prefetched.reset(token)


def take(bank_id: str) -> PrefetchedBank | None:
    """The prefetched row of `bank_id`, the first time it is asked for in this request; else None.
    Tasks the request started share the row (a context copy holds the same object), so it is taken once."""
    bank = _prefetched.get()
    if bank is None or bank.taken or bank.bank_id != bank_id:
        return None
    bank.taken = True
    return bank
