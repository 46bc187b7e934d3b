"""The provider interface every LLM backend implements, and the values it returns.

Messages and tools are OpenAI-shaped dicts whatever the backend: the chat-completions format is the
lingua franca of local servers, so the capabilities write it once and each provider translates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engram.errors import LLMError
from engram.store.storable import storable, storable_text


class ProviderUnavailable(LLMError, ImportError):
    """The provider's optional SDK is not installed; the message says which extra to install.

    An `ImportError` too, so code probing optional features can catch it as one."""

    status = 500

    def __init__(self, provider: str, extra: str) -> None:
        super().__init__(f"LLM provider '{provider}' needs its SDK: pip install 'engram[{extra}]'")


@dataclass(frozen=True)
class TokenUsage:
    """Tokens one or more calls consumed; `a + b` sums them (`sum(usages, TokenUsage())` works too)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    def __radd__(self, other: object) -> TokenUsage:
        # Lets the builtin sum() start from 0.
        if other == 0:
            return self
        return NotImplemented


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for; `arguments` is already decoded from JSON."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-style `tool_calls` entry, to echo the call back in the next request."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class LLMResponse:
    """One completion. `finish_reason` uses OpenAI's vocabulary: stop | length | tool_calls | …"""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        # Whatever a model says may end up stored (facts, entity names, observations, answers): made
        # storable here, the one point every provider's answer passes through.
        if self.text is not None:
            object.__setattr__(self, "text", storable_text(self.text))
        calls = [ToolCall(call.id, call.name, storable(call.arguments)) for call in self.tool_calls]
        object.__setattr__(self, "tool_calls", calls)

    def assistant_message(self) -> dict[str, Any]:
        """This answer as an OpenAI-style assistant message, to continue a tool loop."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


@runtime_checkable
class LLMProvider(Protocol):
    """A chat model. `complete` raises `LLMError` when the provider fails after its retries."""

    name: str
    model: str

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
        """Answer `messages`. With `json_schema` the text is JSON meant to match the schema (the
        provider's schema mode when it has one, so callers must still validate)."""
        ...

    async def aclose(self) -> None:
        """Release connections; the provider is not used afterwards."""
        ...


def decode_tool_arguments(provider: str, name: str, raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Tool arguments as a dict. Models emit them as a JSON string (some servers already decode it);
    an undecodable string is an `LLMError`, because guessing arguments would run the wrong call."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        decoded = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise LLMError(
            f"LLM provider '{provider}' returned malformed arguments for tool '{name}': {excerpt(str(raw))}"
        ) from exc
    if not isinstance(decoded, dict):
        raise LLMError(f"LLM provider '{provider}' returned non-object arguments for tool '{name}': {raw!r}")
    return decoded


def content_text(content: Any) -> str:
    """The text of an OpenAI-style message `content`: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return json.dumps(content)


def tool_name_from_choice(tool_choice: str | dict[str, Any] | None) -> str | None:
    """The function name an OpenAI-style `tool_choice` forces, if it forces one."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function") or {}
        return function.get("name") or tool_choice.get("name")
    return None


def excerpt(text: str, limit: int = 300) -> str:
    """A one-line, bounded piece of a response body for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"
