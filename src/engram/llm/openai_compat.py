"""OpenAI-compatible chat completions over aiohttp: OpenAI itself and the local servers that copy its
API (vLLM, Ollama, LM Studio, llama.cpp server, …).

Servers differ in what they accept, so the provider adapts when a request is rejected rather than
keeping a table of quirks: an unsupported `response_format` json_schema falls back to json_object,
then to the schema in the prompt; a model that refuses `temperature` or `max_tokens` gets the request
without them. An adaptation is remembered once the adapted request succeeds.

aiohttp rather than httpx: a request through httpx's connection pool cost ~1.2 ms more CPU (1.6 against
0.4 ms per call with a stub server), which with a fast local model was most of a bulk retain's event
loop.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engram.errors import LLMError
from engram.llm.base import LLMResponse, TokenUsage, ToolCall, content_text, decode_tool_arguments, excerpt

if TYPE_CHECKING:
    import aiohttp

# Where each named server listens by default; "openai-compatible" needs ENGRAM_LLM_BASE_URL or
# talks to OpenAI.
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-compatible": "https://api.openai.com/v1",
    "vllm": "http://localhost:8000/v1",
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
    "llamacpp": "http://localhost:8080/v1",
    "groq": "https://api.groq.com/openai/v1",
    "openrouter": "https://openrouter.ai/api/v1",
}
# llama.cpp serves whatever it loaded, whatever the name; the others need a real model name.
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "llamacpp": "local"}

MAX_RETRY_DELAY = 20.0
SCHEMA_MODES = ("json_schema", "json_object", "prompt")


@dataclass(frozen=True)
class RequestShape:
    """The request features a server accepted; narrowed when a server rejects one."""

    schema_mode: str = "json_schema"
    send_temperature: bool = True
    max_tokens_field: str = "max_tokens"


class Rejected(Exception):
    """A 4xx (other than 429) answer: not worth retrying as is."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


class OpenAICompatibleProvider:
    """Chat completions against `base_url`; one pooled aiohttp session per provider (and event loop)."""

    def __init__(
        self,
        *,
        model: str,
        name: str = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URLS.get(name) or DEFAULT_BASE_URLS["openai"]).rstrip("/")
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.retry_backoff = retry_backoff
        self._shape = RequestShape()
        self._headers = {"User-Agent": "engram", "Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        """The session of the running event loop (made on first use: aiohttp binds it to its loop;
        imported then too, so a server starts without paying for it)."""
        import aiohttp

        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._session_loop is not loop:
            session = self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            )
            self._session_loop = loop
        return session

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> OpenAICompatibleProvider:
        name = overrides.pop("name", settings.llm_provider)
        model = settings.llm_model or DEFAULT_MODELS.get(name)
        if not model:
            raise ValueError(f"LLM provider '{name}' needs a model name: set ENGRAM_LLM_MODEL")
        options: dict[str, Any] = {
            "model": model,
            "name": name,
            "base_url": settings.llm_base_url,
            "api_key": settings.llm_api_key,
            "timeout": settings.llm_timeout,
            "max_retries": settings.llm_max_retries,
        }
        return cls(**{**options, **overrides})

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.1,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> LLMResponse:
        shape = self._shape
        while True:
            payload = self._payload(
                shape, messages, json_schema, schema_name, temperature, max_tokens, tools, tool_choice
            )
            try:
                data = await self._post(payload)
            except Rejected as rejected:
                adapted = adapt_shape(shape, payload, rejected)
                if adapted is None:
                    raise self._error(describe_failure(rejected.status, rejected.body)) from None
                shape = adapted
                continue
            self._shape = shape
            return self._parse(data)

    async def list_models(self) -> list[str]:
        """Model ids the server offers (`GET /models`): a cheap reachability check."""
        try:
            async with self._client().get(f"{self.base_url}/models") as response:
                status, body = response.status, _text(await response.read())
        except transport_errors() as exc:
            raise self._error(describe_exception(exc, self.timeout)) from exc
        if status >= 400:
            raise self._error(describe_failure(status, body))
        try:
            return [str(item.get("id")) for item in json.loads(body).get("data", [])]
        except (ValueError, AttributeError):
            raise self._error(f"answered GET /models with something else than a model list: {excerpt(body)}") from None

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _payload(
        self,
        shape: RequestShape,
        messages: list[dict[str, Any]],
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int | None,
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if shape.send_temperature:
            payload["temperature"] = temperature
        if max_tokens is not None:
            payload[shape.max_tokens_field] = max_tokens
        if json_schema is not None:
            if shape.schema_mode == "json_schema":
                payload["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": json_schema, "strict": False},
                }
            else:
                payload["messages"] = with_schema_instruction(messages, json_schema)
                if shape.schema_mode == "json_object":
                    payload["response_format"] = {"type": "json_object"}
        if tools:
            payload["tools"] = tools
            if tool_choice is not None:
                payload["tool_choice"] = tool_choice
        return payload

    async def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST with retries on transport errors, timeouts, 429 and 5xx; `Rejected` on other 4xx."""
        attempts = self.max_retries + 1
        failure = ""
        retry_after: float | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._retry_delay(attempt, retry_after))
            retry_after = None
            try:
                request = self._client().post(f"{self.base_url}/chat/completions", data=json.dumps(payload))
                async with request as response:
                    status, body = response.status, _text(await response.read())
                    retry_header = response.headers.get("retry-after")
            except transport_errors() as exc:
                failure = describe_exception(exc, self.timeout)
                continue
            if status == 429 or status >= 500:
                failure = describe_failure(status, body)
                retry_after = parse_retry_after(retry_header)
                continue
            if status >= 400:
                raise Rejected(status, body)
            try:
                return json.loads(body)
            except ValueError:
                raise self._error(f"answered a non-JSON body: {excerpt(body)}") from None
        raise self._error(f"failed after {attempts} attempt{'s' if attempts > 1 else ''}: {failure}")

    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        delay = retry_after if retry_after is not None else self.retry_backoff * 2 ** (attempt - 1)
        # A little jitter so workers that failed together do not retry together.
        return min(MAX_RETRY_DELAY, delay * (1 + random.random() * 0.25))

    def _parse(self, data: dict[str, Any]) -> LLMResponse:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            raise self._error(f"answered without choices: {excerpt(json.dumps(data))}")
        choice = choices[0]
        message = choice.get("message") or {}
        calls = []
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            name = function.get("name", "")
            arguments = decode_tool_arguments(self.name, name, function.get("arguments"))
            calls.append(ToolCall(str(call.get("id") or f"call_{index}"), name, arguments))
        usage = data.get("usage") or {}
        return LLMResponse(
            text=content_text(message.get("content")) or None,
            tool_calls=calls,
            usage=TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            finish_reason=choice.get("finish_reason"),
        )

    def _error(self, what: str) -> LLMError:
        return LLMError(f"LLM provider '{self.name}' (model {self.model} at {self.base_url}) {what}")


def adapt_shape(shape: RequestShape, payload: dict[str, Any], rejected: Rejected) -> RequestShape | None:
    """The narrower request shape a rejection asks for, or None when the rejection is final."""
    body = rejected.body.lower()
    unsupported = any(word in body for word in ("unsupported", "not support", "deprecated", "not allowed"))
    response_format = payload.get("response_format", {}).get("type")
    mentions_format = "response_format" in body or "json_schema" in body or "json_object" in body
    if response_format == "json_schema" and (
        (rejected.status == 400 and mentions_format) or rejected.status in (404, 422)
    ):
        return replace(shape, schema_mode="json_object")
    if response_format == "json_object" and rejected.status in (400, 422) and mentions_format:
        return replace(shape, schema_mode="prompt")
    if rejected.status == 400 and unsupported:
        if "temperature" in payload and "temperature" in body:
            return replace(shape, send_temperature=False)
        if "max_tokens" in payload and "max_tokens" in body:
            return replace(shape, max_tokens_field="max_completion_tokens")
    return None


def with_schema_instruction(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """`messages` with the schema stated in the system prompt, for servers without a schema mode."""
    instruction = (
        "Answer with one JSON object, and nothing else, that matches this JSON schema:\n"
        + json.dumps(schema, separators=(",", ":"))
    )
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = {**messages[0], "content": messages[0]["content"] + "\n\n" + instruction}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def describe_failure(status: int, body: str) -> str:
    """`HTTP <status>: <message>`, using the API's error message when the body has one."""
    message = body
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        error = decoded.get("error", decoded)
        message = (error.get("message") if isinstance(error, dict) else error) or body
    return f"HTTP {status}: {excerpt(str(message))}"


def transport_errors() -> tuple[type[BaseException], ...]:
    """What a request can fail with before an answer is read: refused or dropped connections, bad TLS,
    a body cut short, the total timeout."""
    import aiohttp

    return (aiohttp.ClientError, asyncio.TimeoutError, OSError)


def _text(body: bytes) -> str:
    """A body as text: JSON is UTF-8 (RFC 8259), and guessing another charset costs more than the call."""
    return body.decode("utf-8", errors="replace")


def describe_exception(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"timed out after {timeout:g}s ({type(exc).__name__})"
    return f"could not be reached ({type(exc).__name__}: {exc})"


def parse_retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
