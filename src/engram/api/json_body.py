"""Checks a JSON request body before any handler parses it, so that what the handlers see is always
storable and bounded: text in a Unicode encoding JSON allows, nesting at most `MAX_JSON_DEPTH`
deep, finite numbers only (no `NaN`/`Infinity`, no float that overflows, no integer past 64 bits),
and no string PostgreSQL text cannot hold (NUL, lone surrogates, raw or escaped). Each problem is
reported as (field path like `items[0].metadata.k`, reason)."""

from __future__ import annotations

import json
import math
from typing import Any

MAX_JSON_DEPTH = 32  # a recall's tag_groups may still nest 15 deep
INT64 = 2**63
_MAX_INT_DIGITS = 40  # far past int64; stops Python's 4300-digit conversion error before it happens


class _Unreadable:
    """Stands in for a number the server cannot take, so the walk can name the field holding it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _constant(name: str) -> _Unreadable:
    return _Unreadable(f"{name} is not a JSON number (NaN and Infinity are not allowed)")


def _float(text: str) -> float | _Unreadable:
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(f"{text} is beyond the range of a 64-bit float")


def _int(text: str) -> int | _Unreadable:
    if len(text) <= _MAX_INT_DIGITS:
        value = int(text)
        if -INT64 <= value < INT64:
            return value
    return _Unreadable(f"{text[:24]}{'…' if len(text) > 24 else ''} is beyond the 64-bit integer range")


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store `text`, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate, which is not valid Unicode"
    return None


def decode(body: bytes) -> str | tuple[str, str]:
    """The body as text in the encoding JSON's own detection finds (UTF-8, or UTF-16/32 with or without
    a BOM), as the handlers will read it; raw surrogate bytes decode to lone surrogates, which the walk
    then reports by field. Bytes that are not text are the problem (`body`, reason)."""
    encoding = json.detect_encoding(body)
    try:
        return body.decode(encoding, "surrogatepass")
    except UnicodeDecodeError as exc:
        return "body", f"not valid {encoding.upper()} (byte {exc.start}); send UTF-8 JSON"


def parse(text: str) -> Any:
    """The document, with `_Unreadable` in place of numbers that cannot be taken. Raises
    `json.JSONDecodeError` for what is not JSON and `RecursionError` for absurd nesting."""
    return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)


def find_problem(value: Any) -> tuple[str, str] | None:
    """The first problem in document order: too deep, an unreadable number, or unstorable text (an
    object key or a value). Iterative, so depth cannot exhaust the stack."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        where, node, depth = stack.pop()
        if isinstance(node, str):
            reason = unstorable(node)
            if reason:
                return where or "body", reason
        elif isinstance(node, _Unreadable):
            return where or "body", node.reason
        elif isinstance(node, dict | list):
            if depth >= MAX_JSON_DEPTH:
                return where or "body", f"nested deeper than {MAX_JSON_DEPTH} levels"
            if isinstance(node, dict):
                for key, child in reversed(list(node.items())):
                    path = f"{where}.{key}" if where else str(key)
                    reason = unstorable(key)
                    if reason:
                        return path, f"key {reason}"
                    stack.append((path, child, depth + 1))
            else:
                stack.extend((f"{where}[{i}]", child, depth + 1) for i, child in reversed(list(enumerate(node))))
    return None


def check(body: bytes) -> tuple[str, str] | None:
    """The problem with a JSON body, or None when it is fine — or not JSON at all, which the handler
    answers itself (FastAPI's 422 with the position)."""
    text = decode(body)
    if isinstance(text, tuple):
        return text
    try:
        document = parse(text)
    except RecursionError:
        return "body", f"nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:  # json.JSONDecodeError
        return None
    return find_problem(document)
