"""Anthropic's Messages API through the official SDK (the optional `engram[anthropic]` extra).

Structured output is one forced tool whose input schema is the JSON schema: Claude then fills the
tool's arguments instead of writing prose, and the arguments are returned as the JSON text.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from engram.errors import LLMError
from engram.llm.base import (
    LLMResponse,
    ProviderUnavailable,
    TokenUsage,
    ToolCall,
    content_text,
    decode_tool_arguments,
    excerpt,
    tool_name_from_choice,
)

# The API requires max_tokens; this leaves room for long extraction answers on current models.
DEFAULT_MAX_TOKENS = 8192
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class AnthropicProvider:
    """Claude models; OpenAI-style messages and tools are translated on the way in and out."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise ProviderUnavailable("anthropic", "anthropic") from exc
        self.model = model
        self._api_error: type[Exception] = anthropic.APIError
        # The SDK retries connection errors, 408/409/429 and 5xx itself.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max(0, max_retries)
        )
        # SDK 2 speaks an API version that rejects sampling parameters and dropped them from its
        # signature; older SDKs still take a temperature.
        self._sends_temperature = "temperature" in inspect.signature(self._client.messages.create).parameters

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> AnthropicProvider:
        if not settings.llm_model:
            raise ValueError("LLM provider 'anthropic' needs a model name: set ENGRAM_LLM_MODEL")
        options: dict[str, Any] = {
            "model": settings.llm_model,
            "api_key": settings.llm_api_key,
            "base_url": settings.llm_base_url,
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
        system, conversation = to_anthropic_messages(messages)
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
            "messages": conversation,
        }
        if system:
            request["system"] = system
        if self._sends_temperature:
            request["temperature"] = temperature
        if json_schema is not None:
            request["tools"] = [
                {"name": schema_name, "description": "Record the answer.", "input_schema": json_schema}
            ]
            request["tool_choice"] = {"type": "tool", "name": schema_name}
        elif tools:
            request["tools"] = [to_anthropic_tool(tool) for tool in tools]
            if tool_choice is not None:
                request["tool_choice"] = to_anthropic_tool_choice(tool_choice)
        try:
            message = await self._client.messages.create(**request)
        except self._api_error as exc:
            status = getattr(exc, "status_code", None)
            what = f"HTTP {status}" if status else type(exc).__name__
            raise LLMError(
                f"LLM provider 'anthropic' (model {self.model}) failed: {what}: {excerpt(str(exc))}"
            ) from exc
        return self._parse(message, schema_name if json_schema is not None else None)

    async def aclose(self) -> None:
        await self._client.close()

    def _parse(self, message: Any, schema_tool: str | None) -> LLMResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        structured: str | None = None
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and block.name == schema_tool:
                structured = json.dumps(block.input)
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, dict(block.input or {})))
        finish = FINISH_REASONS.get(message.stop_reason, message.stop_reason)
        if structured is not None and finish == "tool_calls":
            finish = "stop"
        usage = TokenUsage(message.usage.input_tokens or 0, message.usage.output_tokens or 0)
        text = structured if structured is not None else ("".join(texts) or None)
        return LLMResponse(text=text, tool_calls=calls, usage=usage, finish_reason=finish)


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, Anthropic messages). Tool results become `tool_result` blocks in a user turn,
    and consecutive turns of one role are merged, since results of parallel calls share one turn."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(content_text(message.get("content")))
            continue
        if role == "tool":
            role, blocks = "user", [tool_result_block(message)]
        elif role == "assistant":
            blocks = assistant_blocks(message)
        else:
            role, blocks = "user", text_blocks(message.get("content"))
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(part for part in system if part), turns


def assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = text_blocks(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        name = function.get("name", "")
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": name,
                "input": decode_tool_arguments("anthropic", name, function.get("arguments")),
            }
        )
    return blocks


def tool_result_block(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": content_text(message.get("content")),
    }


def text_blocks(content: Any) -> list[dict[str, Any]]:
    text = content_text(content)
    # The API rejects empty text blocks (an assistant turn that only called tools has none).
    return [{"type": "text", "text": text}] if text else []


def to_anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", tool)
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }


def to_anthropic_tool_choice(tool_choice: str | dict[str, Any]) -> dict[str, Any]:
    forced = tool_name_from_choice(tool_choice)
    if forced:
        return {"type": "tool", "name": forced}
    return {"type": {"required": "any", "none": "none"}.get(str(tool_choice), "auto")}
