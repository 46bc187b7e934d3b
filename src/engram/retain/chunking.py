"""Splitting a retained item into extraction chunks of about `size` characters. Conversation turns
("Speaker: text" lines) and JSONL lines are never cut; prose is cut at paragraph, then sentence,
then word boundaries.

Any `size` terminates: the bank setting is range-checked, but a size below `MIN_CHUNK_CHARS` (zero,
negative, from an old stored value) is raised to it, and every cut advances by at least one character."""

from __future__ import annotations

import re

_TURN = re.compile(r"^\s*[\w .'-]{1,40}:\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_CHUNK_CHARS = 50


def is_line_structured(text: str) -> bool:
    """True for transcripts and JSONL, where each line is a unit that must stay whole."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    whole = sum(1 for line in lines if _TURN.match(line) or line.lstrip().startswith("{"))
    return whole >= 0.6 * len(lines)


def chunk_text(text: str, size: int = 3000) -> list[str]:
    size = max(MIN_CHUNK_CHARS, int(size))
    text = text.strip()
    if not text:
        return []
    if len(text) <= size:
        return [text]
    if is_line_structured(text):
        units = [line for line in text.splitlines() if line.strip()]
        return _pack(units, size, "\n")
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    units: list[str] = []
    for paragraph in paragraphs:
        units.extend(_split_long(paragraph.strip(), size))
    return _pack(units, size, "\n\n")


def _split_long(paragraph: str, size: int) -> list[str]:
    if len(paragraph) <= size:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > size:
            cut = sentence.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size  # no space in the second half: cut mid-word
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            pieces.append(sentence)
    return _pack(pieces, size, " ")


def _pack(units: list[str], size: int, joiner: str) -> list[str]:
    """Greedily join consecutive units into chunks no longer than `size` (a longer unit stands alone)."""
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for unit in units:
        extra = len(unit) + (len(joiner) if current else 0)
        if current and length + extra > size:
            chunks.append(joiner.join(current))
            current, length = [], 0
            extra = len(unit)
        current.append(unit)
        length += extra
    if current:
        chunks.append(joiner.join(current))
    return chunks
