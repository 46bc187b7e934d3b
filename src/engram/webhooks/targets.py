"""Which URLs a webhook may target. Only http(s); and, unless
`ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS` is on, no host that resolves to a loopback, private,
link-local, reserved or multicast address — otherwise anyone who may create a webhook could make the
server call its own network (SSRF). Checked when a webhook is saved and again before each attempt,
since a name can be re-pointed after it was saved."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from engram.errors import InvalidInput

MAX_URL_CHARS = 2048


class TargetRefused(InvalidInput):
    def __init__(self, message: str) -> None:
        super().__init__("url", message)


def _check_syntax(url: str) -> tuple[str, int]:
    if len(url) > MAX_URL_CHARS:
        raise TargetRefused(f"at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise TargetRefused(f"is not a valid URL ({exc}): {url!r}") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused(f"must be an http:// or https:// URL, not {url!r}")
    if not parts.hostname:
        raise TargetRefused(f"has no host: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise TargetRefused(f"has an invalid port: {url!r}") from None
    return parts.hostname, port


def _blocked(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


async def check_target(url: str, *, allow_private: bool) -> None:
    """Raise `TargetRefused` (a 400 naming `url`) when the webhook may not call `url`."""
    host, port = _check_syntax(url)
    if allow_private:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as exc:  # an unresolvable or malformed (IDNA) host name
        raise TargetRefused(f"host {host!r} cannot be resolved ({exc})") from None
    blocked = sorted({info[4][0] for info in infos if _blocked(info[4][0])})
    if blocked:
        raise TargetRefused(
            f"host {host!r} resolves to a loopback, private or reserved address ({', '.join(blocked)}); "
            "set ENGRAM_WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow such targets"
        )
