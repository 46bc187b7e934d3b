"""A scripted OpenAI-compatible LLM server for tests: real HTTP on 127.0.0.1, answers decided by the test.

It runs `http.server` in a daemon thread, so sync tests, async tests and a separately started Engram
server can all talk to it. Point Engram at it with `llm.settings_env()` (env vars) or `llm.settings()`.

What it answers, in order:
1. `supports_json_schema = False` makes every request carrying `response_format` json_schema fail
   with a 400, like a server without schema mode (the provider then falls back to json_object).
2. Replies queued with `llm.enqueue(reply, ...)`, first in first out, one per request.
3. Otherwise `llm.handler(request)`. The request is a `ChatRequest`: the JSON body as a dict, plus
   helpers (`.system_prompt`, `.user_text`, `.schema_name`, `.schema`, `.tool_names`,
   `.headers`). The handler returns a `Reply`, or a dict/list (sent as JSON content) or a str
   (sent as text content). Handler exceptions become a 400 naming the exception, and are kept in
   `llm.handler_errors`.
4. Nothing scripted: a 400 saying so (not a 5xx, so clients fail fast instead of retrying).

    with ScriptedLLM() as llm:
        llm.handler = lambda req: {"facts": []} if req.schema_name == "FactExtraction" else "ok"
        llm.enqueue(Reply.error(500), Reply.json({"answer": 42}))  # these two first
        provider = engram.llm.from_settings(llm.settings(llm_max_retries=1))
        ...
        assert llm.requests[-1].schema_name == "Answer"

`llm.settings()` defaults to a 5 s timeout and no retries, so a scripted failure fails at once.
Background work: `llm.wait_for_requests(n)` (sync) / `await llm.wait_for_requests_async(n)`.

Replies: `Reply.json(obj)`, `Reply.text(str)`, `Reply.tool_calls([(name, args), ...])`,
`Reply.error(status, body)`, `Reply.raw(body)` (any 200 body), `Reply.delay(seconds, then=reply)`
(then=None: the handler answers after the delay), `Reply.reject_json_schema()` (a 400 if the request
asks for json_schema, else the handler answers). `usage=(prompt_tokens, completion_tokens)` sets
the reported usage (default 10, 5).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.settings import Settings

MODEL = "scripted"
DEFAULT_USAGE = (10, 5)


class ChatRequest(dict):
    """A received chat-completions body, with accessors for what handlers usually branch on."""

    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.get("messages") or []

    @property
    def system_prompt(self) -> str:
        return "\n".join(_text(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def user_text(self) -> str:
        """The last user message's text."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return _text(users[-1].get("content")) if users else ""

    @property
    def response_format(self) -> str | None:
        """The `response_format` type: "json_schema", "json_object" or None."""
        return (self.get("response_format") or {}).get("type")

    @property
    def schema_name(self) -> str | None:
        return ((self.get("response_format") or {}).get("json_schema") or {}).get("name")

    @property
    def schema(self) -> dict[str, Any] | None:
        return ((self.get("response_format") or {}).get("json_schema") or {}).get("schema")

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("function", {}).get("name", "") for tool in self.get("tools") or []]


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build with the class methods."""

    status: int = 200
    content: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    error_body: str = ""
    finish_reason: str | None = None
    usage: tuple[int, int] = DEFAULT_USAGE
    delay_seconds: float = 0.0
    then: Reply | None = None
    only_if_json_schema: bool = False
    raw_body: dict[str, Any] | None = None

    @classmethod
    def json(cls, obj: Any, *, usage: tuple[int, int] = DEFAULT_USAGE, finish_reason: str = "stop") -> Reply:
        return cls(content=json.dumps(obj), usage=usage, finish_reason=finish_reason)

    @classmethod
    def text(cls, text: str, *, usage: tuple[int, int] = DEFAULT_USAGE, finish_reason: str = "stop") -> Reply:
        return cls(content=text, usage=usage, finish_reason=finish_reason)

    @classmethod
    def tool_calls(
        cls, calls: list[tuple[str, dict[str, Any]]], *, usage: tuple[int, int] = DEFAULT_USAGE
    ) -> Reply:
        return cls(calls=tuple(calls), usage=usage, finish_reason="tool_calls")

    @classmethod
    def error(cls, status: int, body: str = "scripted error") -> Reply:
        return cls(status=status, error_body=body)

    @classmethod
    def raw(cls, body: dict[str, Any]) -> Reply:
        """A 200 with exactly this JSON body, for answers the other helpers cannot produce."""
        return cls(raw_body=body)

    @classmethod
    def delay(cls, seconds: float, then: Reply | None = None) -> Reply:
        return cls(delay_seconds=seconds, then=then)

    @classmethod
    def reject_json_schema(cls) -> Reply:
        return cls(
            status=400,
            error_body=_openai_error(
                "response_format of type 'json_schema' is not supported", "response_format"
            ),
            only_if_json_schema=True,
        )

    def body(self, request_index: int) -> dict[str, Any]:
        """The chat-completions JSON for a 200 reply."""
        if self.raw_body is not None:
            return self.raw_body
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{request_index}_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(self.calls)
            ]
        prompt, completion = self.usage
        return {
            "id": f"chatcmpl-{request_index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason or "stop"}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


Handler = Callable[[ChatRequest], "Reply | dict[str, Any] | list[Any] | str"]


class ScriptedLLM:
    """The server. Use as a context manager, or `start()` / `stop()` (e.g. in a session fixture,
    with `reset()` between tests)."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler | None = handler
        self.supports_json_schema = True
        self.requests: list[ChatRequest] = []
        self.handler_errors: list[BaseException] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedLLM:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_request_handler(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                # A short poll interval makes stop() quick.
                target=self._server.serve_forever,
                args=(0.05,),
                name="scripted-llm",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, *replies: Reply | dict[str, Any] | list[Any] | str) -> None:
        with self._lock:
            self._queue.extend(_as_reply(reply) for reply in replies)

    def reset(self) -> None:
        """Forget requests, queued replies, the handler and json_schema support changes."""
        with self._lock:
            self.requests.clear()
            self.handler_errors.clear()
            self._queue.clear()
            self.handler = None
            self.supports_json_schema = True

    # -- inspection --------------------------------------------------------------------------

    def last_system_prompt(self) -> str:
        return self.requests[-1].system_prompt if self.requests else ""

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[ChatRequest]:
        """Block until `count` requests arrived (for work done in the background)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"ScriptedLLM got {len(self.requests)} requests, expected {count}")
            return list(self.requests)

    async def wait_for_requests_async(self, count: int, timeout: float = 5.0) -> list[ChatRequest]:
        """`wait_for_requests` for async tests, where blocking would stall the work being waited for."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"ScriptedLLM got {len(self.requests)} requests, expected {count}")
            await asyncio.sleep(0.01)
        return list(self.requests)

    def settings_env(self) -> dict[str, str]:
        return {
            "ENGRAM_LLM_PROVIDER": "openai",
            "ENGRAM_LLM_BASE_URL": self.base_url,
            "ENGRAM_LLM_API_KEY": "test-key",
            "ENGRAM_LLM_MODEL": MODEL,
        }

    def settings(self, **overrides: Any) -> Settings:
        """Engram `Settings` pointing at this server (short timeout, no retries unless overridden)."""
        from engram.settings import Settings

        values: dict[str, Any] = {
            "llm_provider": "openai",
            "llm_base_url": self.base_url,
            "llm_api_key": "test-key",
            "llm_model": MODEL,
            "llm_timeout": 5.0,
            "llm_max_retries": 0,
        }
        return Settings(**{**values, **overrides})

    # -- serving (called from server threads) -------------------------------------------------

    def _record(self, request: ChatRequest) -> int:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
            return len(self.requests)

    def _answer(self, request: ChatRequest) -> Reply:
        wants_schema = request.response_format == "json_schema"
        if wants_schema and not self.supports_json_schema:
            return replace(Reply.reject_json_schema(), only_if_json_schema=False)
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None and not (queued.only_if_json_schema and not wants_schema):
            return queued
        return self._from_handler(request)

    def _from_handler(self, request: ChatRequest) -> Reply:
        if self.handler is None:
            return Reply.error(400, "ScriptedLLM has no reply for this request: enqueue one or set .handler")
        try:
            return _as_reply(self.handler(request))
        except Exception as exc:  # surfaced to the client and kept for the test to inspect
            self.handler_errors.append(exc)
            return Reply.error(400, f"ScriptedLLM handler raised {traceback.format_exception_only(exc)[-1]}")


def _make_request_handler(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, every reply on a kept-alive connection
        # waits ~40 ms for a delayed ACK.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._send(404, json.loads(_openai_error(f"no route {self.path}")))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, json.loads(_openai_error(f"no route {self.path}")))
                return
            request = ChatRequest(json.loads(raw or b"{}"))
            request.headers = {key.lower(): value for key, value in self.headers.items()}
            index = llm._record(request)
            reply = llm._answer(request)
            while reply.delay_seconds:
                time.sleep(reply.delay_seconds)
                reply = reply.then or llm._from_handler(request)
            if reply.status != 200:
                self._send(reply.status, reply.error_body)
            else:
                self._send(200, reply.body(index))

        def _send(self, status: int, body: dict[str, Any] | str) -> None:
            is_json = isinstance(body, dict) or body.lstrip().startswith("{")
            data = (json.dumps(body) if isinstance(body, dict) else body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if is_json else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return RequestHandler


def _as_reply(value: Reply | dict[str, Any] | list[Any] | str) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply.text(value)
    return Reply.json(value)


def _openai_error(message: str, param: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": param}})


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
