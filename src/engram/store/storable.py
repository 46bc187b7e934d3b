"""Making text storable before it goes into PostgreSQL, which refuses NUL in `text` and `jsonb`, and
whose UTF-8 cannot hold a lone surrogate (Python strings can). Text that comes from outside the
request checks — LLM answers and error messages, library and stdio callers — passes through here at
the store's and the LLM's boundaries: a job whose failure reason held a NUL could never be recorded,
so it stayed `processing` and was re-run forever."""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable_text(text: str) -> str:
    """`text` without NUL characters and with each lone surrogate replaced by U+FFFD."""
    if _UNSTORABLE.search(text) is None:  # the common case: one scan, no copy
        return text
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else REPLACEMENT, text)


def storable(value: Any) -> Any:
    """`value` with every string in it (dict keys too, at any depth) made storable."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(item) for item in value]
    return value
