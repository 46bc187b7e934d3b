"""Bodies as the audit log keeps them: parsed JSON with secrets replaced and every part bounded, so an
entry can neither leak a credential nor grow without limit. A body that is not JSON, or too large to
parse, is kept as its size only — a raw excerpt could cut a secret in half and keep the half."""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "[redacted]"
SECRET_KEY = re.compile(r"(secret|password|passwd|token|api[_-]?key|authorization|credential|private[_-]?key)",
                        re.IGNORECASE)
MAX_PARSE_BYTES = 256 * 1024
MAX_STRING = 2000
MAX_ITEMS = 50
MAX_DEPTH = 8


def redact(value: Any, depth: int = 0) -> Any:
    if depth >= MAX_DEPTH:
        return "[nested too deep]"
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_ITEMS:
                out["[truncated]"] = f"{len(value) - MAX_ITEMS} more keys"
                break
            out[key] = REDACTED if SECRET_KEY.search(str(key)) and item is not None else redact(item, depth + 1)
        return out
    if isinstance(value, list):
        items = [redact(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"[{len(value) - MAX_ITEMS} more items]")
        return items
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + f"…[{len(value) - MAX_STRING} more characters]"
    return value


def kept_body(raw: bytes, total_bytes: int) -> dict[str, Any] | None:
    """What the log keeps of a body whose first bytes are `raw` (of `total_bytes` in all)."""
    if total_bytes == 0:
        return None
    if total_bytes > len(raw) or len(raw) > MAX_PARSE_BYTES:
        return {"truncated": True, "bytes": total_bytes}
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {"not_json": True, "bytes": total_bytes}
    return {"body": redact(parsed)}


def redact_query(query: str) -> dict[str, Any]:
    from urllib.parse import parse_qsl

    pairs = parse_qsl(query, keep_blank_values=True)
    return redact({key: value for key, value in pairs})
