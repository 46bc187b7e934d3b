"""`engram.Memory`: Engram in-process, with no HTTP server. It calls the same capabilities as the
server (retain, recall, reflect, banks), on the embedded PostgreSQL started on first use (or
`database_url`). Sync methods block; the `a`-prefixed ones are awaitable. A background worker runs
consolidation and other queued work, as in the server."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from engram.settings import Settings
from engram.types import MemoryItem, RecallRequest, RecallResponse, ReflectRequest, ReflectResponse

T = TypeVar("T")


class Memory:
    def __init__(self, home: str | Path | None = None, *, database_url: str | None = None, **settings: Any) -> None:
        base = Settings.from_env()
        overrides: dict[str, Any] = dict(settings)
        if home is not None:
            overrides["home"] = Path(home).expanduser()
        if database_url is not None:
            overrides["database_url"] = database_url
        self.settings = dataclasses.replace(base, **overrides)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="engram-memory", daemon=True)
        self._thread.start()
        self._services: Any = None
        self._worker: Any = None
        self._opening: Future[Any] | None = None
        self._lock = threading.Lock()

    # --- plumbing -------------------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._submit(coro))

    async def _open(self) -> Any:
        if self._services is None:
            from engram.api.app import open_services
            from engram.worker.runner import Worker

            self._services = await open_services(self.settings)
            self._worker = Worker(self._services)
            await self._worker.start()
        return self._services

    def close(self) -> None:
        async def shutdown() -> None:
            from engram.api.app import close_services

            if self._worker is not None:
                await self._worker.stop()
            if self._services is not None:
                await close_services(self._services)

        if self._thread.is_alive():
            self._run(shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- capabilities ---------------------------------------------------------------------------

    async def _retain(
        self, bank_id: str, items: list[dict[str, Any]], document_tags: list[str] | None
    ) -> dict[str, Any]:
        from engram.retain.prepare import prepare_items
        from engram.retain.replanned import retain_replanned

        services = await self._open()
        prepared = prepare_items([MemoryItem.model_validate(i) for i in items], document_tags)
        outcome = await retain_replanned(services, bank_id, prepared,
                                         import_wait=services.settings.import_wait_seconds)
        return {"items_count": outcome.items_count, "memory_ids": [str(u) for u in outcome.unit_ids]}

    def retain(self, bank_id: str, content: str, **item: Any) -> dict[str, Any]:
        """Store one item (fields as in the API: timestamp, context, metadata, document_id, tags, …)."""
        return self._run(self._retain(bank_id, [{"content": content, **item}], None))

    async def aretain(self, bank_id: str, content: str, **item: Any) -> dict[str, Any]:
        return await self._arun(self._retain(bank_id, [{"content": content, **item}], None))

    def retain_batch(
        self, bank_id: str, items: list[dict[str, Any]], document_tags: list[str] | None = None
    ) -> dict[str, Any]:
        """Store several items in one transaction (each a dict as in the API's `items`)."""
        return self._run(self._retain(bank_id, items, document_tags))

    async def aretain_batch(
        self, bank_id: str, items: list[dict[str, Any]], document_tags: list[str] | None = None
    ) -> dict[str, Any]:
        return await self._arun(self._retain(bank_id, items, document_tags))

    async def _recall(self, bank_id: str, query: str, options: dict[str, Any]) -> RecallResponse:
        from engram.recall.pipeline import recall

        return await recall(await self._open(), bank_id, RecallRequest(query=query, **options))

    def recall(self, bank_id: str, query: str, **options: Any) -> RecallResponse:
        """Options as in the API: types, budget, max_tokens, tags, tags_match, query_timestamp, trace, …"""
        return self._run(self._recall(bank_id, query, options))

    async def arecall(self, bank_id: str, query: str, **options: Any) -> RecallResponse:
        return await self._arun(self._recall(bank_id, query, options))

    async def _reflect(self, bank_id: str, query: str, options: dict[str, Any]) -> ReflectResponse:
        from engram.reflect.agent import reflect

        return await reflect(await self._open(), bank_id, ReflectRequest(query=query, **options))

    def reflect(self, bank_id: str, query: str, **options: Any) -> ReflectResponse:
        return self._run(self._reflect(bank_id, query, options))

    async def areflect(self, bank_id: str, query: str, **options: Any) -> ReflectResponse:
        return await self._arun(self._reflect(bank_id, query, options))

    async def _banks(self) -> list[str]:
        services = await self._open()
        return [r["bank_id"] for r in await services.pool.fetch("SELECT bank_id FROM banks ORDER BY created_at")]

    def banks(self) -> list[str]:
        return self._run(self._banks())

    async def abanks(self) -> list[str]:
        return await self._arun(self._banks())

    async def _delete_bank(self, bank_id: str) -> bool:
        from engram.store.banks import delete_bank

        return await delete_bank((await self._open()).pool, bank_id)

    def delete_bank(self, bank_id: str) -> bool:
        return self._run(self._delete_bank(bank_id))

    async def adelete_bank(self, bank_id: str) -> bool:
        return await self._arun(self._delete_bank(bank_id))
