"""Optional cross-encoder reranking with a local model: a directory holding `model.onnx` (a
cross-encoder such as ms-marco-MiniLM exported to ONNX) and its `tokenizer.json`, named by
ENGRAM_RERANKER_MODEL_PATH. Nothing is downloaded; with no model configured recall skips this step."""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from engram.errors import EngramError

MAX_PAIR_TOKENS = 512
BATCH_SIZE = 32


class CrossEncoder:
    """Scores (query, text) pairs in [0, 1] (sigmoid of the model's relevance logit)."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        model, tokenizer = directory / "model.onnx", directory / "tokenizer.json"
        if not model.is_file() or not tokenizer.is_file():
            raise EngramError(f"reranker model directory {directory} needs model.onnx and tokenizer.json")
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(MAX_PAIR_TOKENS)
        self._tokenizer.enable_padding()
        # The embedder's session: threads that sleep between runs, and without the fusion whose kernel is
        # slower on BERT-style models (a MiniLM stand-in scoring 300 pairs: 691 -> 621 ms).
        from engram.models.embedder import inference_session, session_options

        self._session = inference_session(model, session_options())
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        scores = [self._score_batch(query, texts[i : i + BATCH_SIZE]) for i in range(0, len(texts), BATCH_SIZE)]
        return np.concatenate(scores) if scores else np.zeros(0, dtype=np.float32)

    def _score_batch(self, query: str, texts: list[str]) -> np.ndarray:
        with self._lock:
            encoded = self._tokenizer.encode_batch([(query, text) for text in texts])
        feeds = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        relevance = logits.reshape(len(texts), -1)[:, -1].astype(np.float64)
        return (1.0 / (1.0 + np.exp(-relevance))).astype(np.float32)


@lru_cache(maxsize=2)
def cross_encoder(directory: str) -> CrossEncoder:
    return CrossEncoder(Path(directory).expanduser())
