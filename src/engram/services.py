"""The dependencies every capability receives: settings, the store, the LLM (or None)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from engram.link_counts import LinkCounts
    from engram.llm.base import LLMProvider
    from engram.settings import Settings
    from engram.store.pool import Store
    from engram.store.tx import Conn


@dataclass
class Services:
    settings: Settings
    store: Store
    llm: LLMProvider | None = None
    wake: Callable[[], None] | None = None  # set by the in-process worker: look at the queue now
    link_counts: LinkCounts = field(default_factory=lambda: _link_counts())  # the stats' slow part, kept a while

    def wake_worker(self) -> None:
        if self.wake is not None:
            self.wake()

    @property
    def pool(self):  # noqa: ANN201 - asyncpg.Pool, kept out of the import path
        return self.store.pool

    def changing_bank(self, bank_id: str, undone: str) -> AbstractAsyncContextManager[Conn]:
        """A transaction changing what an existing bank holds, alone among its writes, begun once no
        import holds the bank (waiting up to `import_wait_seconds`, then BankBusy saying nothing was
        `undone`): `writer_locks.writing_to_bank` as every edit, delete and clear uses it."""
        from engram.store.writer_locks import writing_to_bank

        return writing_to_bank(self.pool, bank_id, self.settings.import_wait_seconds, make_bank=False, undone=undone)

    async def bank_config(self, bank_id: str) -> dict[str, Any]:
        """The bank's effective config (env defaults + its overrides); defaults for an unknown bank."""
        from engram.bank_config import resolve_config

        config = await self.existing_bank_config(bank_id)
        return config if config is not None else resolve_config(self.settings.bank_defaults, {}, bank_id)

    async def existing_bank_config(self, bank_id: str) -> dict[str, Any] | None:
        """The bank's effective config, or None when there is no such bank (one round trip for both, or
        none when the request's alias lookup read it: `engram.bank_prefetch`)."""
        from engram.bank_config import resolve_config
        from engram.bank_prefetch import take

        if (prefetched := take(bank_id)) is not None:
            exists, overrides = prefetched.exists, prefetched.overrides
        else:
            row = await self.pool.fetchrow("SELECT config FROM banks WHERE bank_id = $1", bank_id)
            exists, overrides = row is not None, row["config"] if row is not None else None
        return resolve_config(self.settings.bank_defaults, overrides or {}, bank_id) if exists else None


def _link_counts() -> LinkCounts:
    from engram.link_counts import LinkCounts

    return LinkCounts()
