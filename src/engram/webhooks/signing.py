"""Delivery signatures, as Hindsight 1.1.0 sends them: `sha256=<hex HMAC-SHA256 of the body>` in
`X-Hindsight-Signature` (and, identical, GitHub's `X-Hub-Signature-256`), plus a timestamped
`X-Hindsight-Signature-V2: t=<unix seconds>,v1=<hex HMAC of "<t>.<body>">` for replay protection."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sign_v2(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, body: bytes, signature: str) -> bool:
    """What a receiver does: recompute and compare in constant time."""
    return hmac.compare_digest(sign(secret, body), signature)
