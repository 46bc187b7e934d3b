"""Embedding a retain's facts, while the rest of the retain goes on.

A retain extracts its chunks (LLM calls, or the offline extractor), embeds the facts, then writes them.
Done one after the other, the embedder's threads sat idle while chunks were extracted, and the event
loop sat idle while they embedded: on two cores a bulk retain kept about one busy. `EmbeddingStream`
embeds each chunk's facts as soon as its extraction is done, in batches of whatever has come in
meanwhile, so the model runs beside the extraction of the next chunks; the writer waits for it only
when it needs the vectors (after the document's own rows are written), and then takes the facts batch
by batch as their vectors come in (`embedded()`), so PostgreSQL stores the first ones while the model
embeds the last. Whoever adds the facts closes the stream (`close`) when no more will come; a writer can
take the first facts before then (an offline retain of new documents starts writing while it extracts)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from engram import cpu_priority

if TYPE_CHECKING:
    from engram.retain.pipeline import PendingUnit


def embed_units_sync(units: list[PendingUnit]) -> None:
    """Each fact's own vector (text, date, entity names) and token count, and the vectors of its
    sentences when it has several; one call of the model for all."""
    from engram.models.embedder import embedder
    from engram.models.tokens import count_tokens_batch
    from engram.retain.facts import embedding_text

    texts = [embedding_text(u.row.text, u.row.occurred_start or u.row.mentioned_at, u.entity_names) for u in units]
    owners = [u for u in units for _ in u.fact.sentences]
    vectors = embedder().embed(texts + [sentence for u in units for sentence in u.fact.sentences])
    token_counts = count_tokens_batch([u.row.text for u in units])
    for unit, vector, tokens in zip(units, vectors[: len(texts)], token_counts, strict=True):
        unit.row.embedding = vector
        unit.row.token_count = tokens
    for unit, vector in zip(owners, vectors[len(texts):], strict=True):
        unit.sentence_vectors.append(vector)


_embed_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[bool, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


def _slots(low_priority: bool) -> asyncio.Semaphore:
    """How many retains embed at once (per event loop and priority): as many as the cores keep busy,
    each run of the model using the embedder's threads. More would only share the cores slower.
    Low-priority retains (`engram.cpu_priority`) have slots of their own: a one-item retain waiting
    for a bulk retain's batch, made slow by its low priority, would inherit that priority. Recall's query
    embeddings do not wait here, so a bulk import does not queue them."""
    loop = asyncio.get_running_loop()
    slots = _embed_slots.setdefault(loop, {})
    if low_priority not in slots:
        from engram.models.embedder import default_threads, usable_cpus

        slots[low_priority] = asyncio.Semaphore(max(1, usable_cpus() // default_threads()))
    return slots[low_priority]


async def embed_units(units: list[PendingUnit]) -> None:
    if units:
        async with _slots(cpu_priority.at_low_priority()):
            await cpu_priority.to_thread(embed_units_sync, units)


# The most facts one run of the model takes from a stream: enough to keep its threads busy, few
# enough that the writer gets the first facts of a large retain while the model embeds the rest.
MAX_BATCH = 32
# Once no more facts will come, runs take half of those left, until TAIL_BATCH or fewer end it:
# the writer inserts a batch while the model embeds the next, so what it inserts after the model is
# done, with a core idle, is the last batch alone. A full last batch of 32 cost a 100-item bulk call
# ~45 ms of its ~420 (each fact's index entries ~1.5 ms of PostgreSQL).
TAIL_BATCH = 4


class EmbeddingStream:
    """Facts handed over with `add` are embedded in the background, in the order given, each batch
    being what was added while the previous one ran (at most MAX_BATCH). `close()` says no more will
    come. `embedded()` hands each batch over once its vectors are in, until the stream is closed and
    all are; `finish()` closes it and waits for the last of them. Both raise what embedding raised;
    `cancel()` stops it (a retain that failed before its write). Made inside `cpu_priority.low_priority()`,
    it embeds at low priority (its task carries the flag)."""

    def __init__(self, embed: Callable[[list[Any]], Any] = embed_units) -> None:
        self._embed = embed
        self._waiting: list[Any] = []
        self._ready: list[Any] = []
        self._arrived = asyncio.Event()
        self._progressed = asyncio.Event()  # a batch is embedded, or the stream ended
        self._closed = False
        self._task = asyncio.create_task(self._run())

    def add(self, units: list[Any]) -> None:
        if self._closed:
            raise RuntimeError("no facts can be added to a finished EmbeddingStream")
        if units:
            self._waiting.extend(units)
            self._arrived.set()

    async def _run(self) -> None:
        try:
            while True:
                await self._arrived.wait()
                self._arrived.clear()
                while self._waiting:
                    size = self._batch_size()
                    batch, self._waiting = self._waiting[:size], self._waiting[size:]
                    await self._embed(batch)
                    self._ready.extend(batch)
                    self._progressed.set()
                if self._closed:
                    return
        finally:
            self._progressed.set()

    def _batch_size(self) -> int:
        left = len(self._waiting)
        if not self._closed or left <= TAIL_BATCH:
            return min(left, MAX_BATCH)
        return min(MAX_BATCH, -(-left // 2))

    def close(self) -> None:
        """No more facts will be added: the stream ends once those added are embedded."""
        self._closed = True
        self._arrived.set()

    async def finish(self) -> None:
        self.close()
        await self._task

    async def embedded(self) -> AsyncIterator[list[Any]]:
        """The facts whose vectors are in, batch by batch, until the stream is closed and all are."""
        while True:
            if self._ready:
                batch, self._ready = self._ready, []
                yield batch
            elif self._task.done():
                self._task.result()  # raises what embedding raised
                return
            else:
                self._progressed.clear()
                await self._progressed.wait()

    async def cancel(self) -> None:
        self._closed = True
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
