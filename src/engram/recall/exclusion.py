"""Exclusion questions ("What sports does John like besides basketball?"): the excluded thing is what
the question already knows, so its words must not pull the facts that name it to the top of the
keyword arm."""

from __future__ import annotations

import re

_EXCLUSION = re.compile(
    r"\b(?:besides|other than|apart from|aside from|except(?: for)?|in addition to)\s+([^?.!,;]+)",
    re.IGNORECASE,
)


def keyword_text(query: str) -> str:
    """The query without its exclusion phrases, for keyword search; the query itself when it has none."""
    stripped = _EXCLUSION.sub(" ", query)
    return stripped if stripped.strip() else query
