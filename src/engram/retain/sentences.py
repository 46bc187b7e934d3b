"""Sentences and conversation turns, by rule: how the no-LLM retain path cuts a chunk into facts.

A full stop ends a sentence only before a capital, a digit or an opening quote, and never after a
known abbreviation ("Dr.", "e.g."), an initial ("J. K.") or a dotted acronym ("U.S."); decimals,
URLs and e-mail addresses never contain "dot + space", so they stay whole on their own.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "split_turns", "turn_speaker"]

MIN_WORDS = 3  # a shorter piece ("Hey Mel!", "Thanks!") is merged into its neighbour

_ABBREVIATIONS = frozenset({
    "dr", "mr", "mrs", "ms", "mx", "prof", "sr", "jr", "st", "mt", "ft", "rev", "gen", "col", "capt", "lt",
    "sgt", "gov", "sen", "pres", "vs", "e.g", "i.e", "cf", "viz", "al", "approx", "dept", "est", "fig",
    "figs", "vol", "vols", "pp", "inc", "ltd", "corp", "bros", "assn", "ave", "blvd", "rd", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "tues", "thurs",
})
# a full stop, "?!", or an ellipsis, with any closing quotes/brackets, then the space before the next one
_BOUNDARY = re.compile(r"(?:[.!?]+|…)[\"'”’)\]]*\s+")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # "U.S", "a.m", "e.g" (the last dot is the boundary's)
_OPENERS = "\"'“‘([¿¡"
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")

_SPEAKER = r"(?:user|assistant|system|human|[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){0,2})"
_TURN = re.compile(rf"^[ \t]*(?P<speaker>{_SPEAKER})[ \t]*:(?:[ \t]+(?P<text>.*)|[ \t]*)$")
# "Note: …" and friends open a line like a speaker does, but are labels
_LABELS = frozenset({
    "note", "notes", "nb", "warning", "caution", "important", "example", "examples", "tip", "tips", "update",
    "edit", "ps", "p.s", "source", "sources", "subject", "re", "fwd", "from", "to", "cc", "bcc", "date",
    "time", "summary", "answer", "question", "title", "step", "steps", "ingredients", "reminder", "todo",
    "result", "results", "output", "input", "error", "usage", "context", "tags", "topic", "agenda", "location",
    "address", "phone", "email", "price", "http", "https", "status", "description", "name", "type",
})


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, in order, whitespace-normalised. Paragraph breaks (and line breaks
    that end a sentence or start a new line of a list/transcript) always separate sentences; pieces
    under three words join the next sentence of their paragraph (the previous one at its end)."""
    sentences: list[str] = []
    for paragraph in _paragraphs(text):
        sentences.extend(_merge_short(_split_paragraph(paragraph)))
    return sentences


def split_turns(text: str) -> list[tuple[str | None, str]]:
    """A transcript's turns as (speaker, utterance), for lines that start with "Name:" (one to three
    capitalised words, or user/assistant/system/human). Lines that start no turn continue the current
    one. Text that is no transcript (fewer than two turn lines, unless it is one line) comes back as
    (None, paragraph) pairs, as does any text before the first turn."""
    lines = text.splitlines()
    turns = [_turn_start(line) for line in lines]
    if sum(turn is not None for turn in turns) < (1 if len([ln for ln in lines if ln.strip()]) == 1 else 2):
        return [(None, paragraph) for paragraph in _blocks(text)]
    result: list[tuple[str | None, str]] = []
    preamble: list[str] = []
    speaker: str | None = None
    utterance: list[str] = []
    for line, turn in zip(lines, turns, strict=True):
        if turn is None:
            (utterance if speaker is not None else preamble).append(line)
            continue
        if speaker is not None:
            result.append((speaker, "\n".join(utterance).strip()))
        speaker, utterance = turn[0], [turn[1]]
    if speaker is not None:
        result.append((speaker, "\n".join(utterance).strip()))
    head = [(None, paragraph) for paragraph in _blocks("\n".join(preamble))]
    return head + [(who, said) for who, said in result if said]


def turn_speaker(line: str) -> str | None:
    """The speaker of a line that opens a turn ("Melanie: I ran a race"), as `split_turns` reads it."""
    turn = _turn_start(line)
    return turn[0] if turn else None


def _turn_start(line: str) -> tuple[str, str] | None:
    if ":" not in line:  # no turn without its colon: most lines, and every fact recall scores, skip the regex
        return None
    match = _TURN.match(line)
    if match is None:
        return None
    speaker = " ".join(match.group("speaker").split())
    if speaker.lower().rstrip(".") in _LABELS:
        return None
    return speaker, (match.group("text") or "").strip()


def _blocks(text: str) -> list[str]:
    return [block.strip() for block in _PARAGRAPH.split(text) if block.strip()]


def _paragraphs(text: str) -> list[str]:
    """Blocks split on blank lines, then on the single line breaks that are not mere wrapping."""
    paragraphs: list[str] = []
    for block in _blocks(text):
        current = ""
        for line in block.splitlines():
            line = line.strip()
            if not line:
                continue
            if current and _wraps(current, line):
                current = f"{current} {line}"
            else:
                if current:
                    paragraphs.append(current)
                current = line
        if current:
            paragraphs.append(current)
    return paragraphs


def _wraps(previous: str, line: str) -> bool:
    """A hard-wrapped line: the previous one stops mid-sentence and this one goes on in lowercase."""
    last = previous[-1]
    return (last.isalnum() or last in ",;-–(") and line[0].islower() and _turn_start(line) is None


def _split_paragraph(paragraph: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for boundary in _BOUNDARY.finditer(paragraph):
        end = boundary.end()
        if end >= len(paragraph) or not _ends_sentence(paragraph, boundary.start(), end):
            continue
        pieces.append(" ".join(paragraph[start:end].split()))
        start = end
    tail = " ".join(paragraph[start:].split())
    if tail:
        pieces.append(tail)
    return pieces


def _ends_sentence(paragraph: str, mark: int, next_start: int) -> bool:
    following = paragraph[next_start]
    punctuation = paragraph[mark]
    if punctuation in "!?":
        return True
    if not (following.isupper() or following.isdigit() or following in _OPENERS):
        return False  # "e.g. this", "5 p.m. tomorrow", "well... maybe"
    if punctuation != ".":
        return True  # an ellipsis before a capital
    word_start = paragraph.rfind(" ", 0, mark) + 1
    word = paragraph[word_start:mark].lstrip(_OPENERS)
    if paragraph.startswith("..", mark):
        return True
    if len(word) == 1 and word.isalpha():
        return False  # an initial: "J. K. Rowling"
    if word.lower() in ("no", "nos") and following.isdigit():
        return False  # "No. 5"
    return word.lower() not in _ABBREVIATIONS and not _DOTTED.fullmatch(word)


def _merge_short(pieces: list[str]) -> list[str]:
    merged: list[str] = []
    pending = ""
    for piece in pieces:
        piece = f"{pending} {piece}" if pending else piece
        if len(piece.split()) < MIN_WORDS:
            pending = piece
            continue
        merged.append(piece)
        pending = ""
    if pending:
        if merged:
            merged[-1] = f"{merged[-1]} {pending}"
        else:
            merged.append(pending)
    return merged
