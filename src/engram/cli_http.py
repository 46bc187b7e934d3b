"""The HTTP side of the client commands: where the server is, the API key, and server errors turned
into one line that says what to do."""

from __future__ import annotations

import argparse
import os
from typing import Any
from urllib.parse import quote

from engram.cli_command import UserError

LOCAL_HOSTS = ("", "0.0.0.0", "::", "[::]")


def server_url(args: argparse.Namespace) -> str:
    """--url, else $ENGRAM_URL, else the address `engram serve` listens on ($ENGRAM_HOST/$ENGRAM_PORT)."""
    from engram.settings import read_env

    explicit = getattr(args, "url", None) or read_env("url")
    if explicit:
        return explicit.rstrip("/")
    host = read_env("host") or "127.0.0.1"
    host = "127.0.0.1" if host in LOCAL_HOSTS else host
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{read_env('port') or 8888}"


def bank_path(bank: str, rest: str = "") -> str:
    if not bank or "/" in bank:
        raise UserError(f"'{bank}' is not a bank id: bank ids are non-empty and contain no '/'")
    return f"/v1/default/banks/{quote(bank, safe='')}{rest}"


def _detail(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):  # FastAPI's validation errors
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail
                         if isinstance(d, dict)) or str(detail)
    return str(detail)


class Client:
    """One server, one API key; `request` answers the decoded JSON or raises UserError."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.url = server_url(args)
        key = getattr(args, "api_key", None) or os.environ.get("ENGRAM_API_KEY")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def request(
        self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
        timeout: float | None = 600,
    ) -> Any:
        """`timeout`: seconds, or None for a call that takes as long as the work (a bank delete)."""
        import httpx

        try:
            response = httpx.request(method, self.url + path, json=body, params=params, headers=self.headers,
                                     timeout=timeout)
        except httpx.HTTPError as exc:
            raise UserError(f"cannot reach the Engram server at {self.url} ({exc}): start it with `engram serve`, "
                            "or point --url / ENGRAM_URL at it") from None
        if response.status_code == 401:
            raise UserError(f"the server at {self.url} wants an API key: pass --api-key KEY or set ENGRAM_API_KEY")
        if response.status_code >= 400:
            hint = " (`engram banks` lists them)" if response.status_code == 404 and "bank" in _detail(response) else ""
            raise UserError(f"{_detail(response)}{hint} (HTTP {response.status_code})")
        return response.json()
