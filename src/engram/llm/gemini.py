"""Google Gemini through the official `google-genai` SDK (the optional `engram[gemini]` extra).

Structured output uses JSON mode with `response_json_schema`; tools become function declarations.
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
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

FINISH_REASONS = {"STOP": "stop", "MAX_TOKENS": "length"}
# Gemini 3+ wants each replayed function call to carry the thought signature it came with. The
# signatures are kept here by call id; a call replayed without one (another process, an old
# conversation) gets the placeholder Google documents for that case.
SKIP_SIGNATURE = b"skip_thought_signature_validator"
SIGNATURES_KEPT = 2048
# Gemini does not always id its calls; ids made up here are not sent back to it.
LOCAL_ID_PREFIX = "local-"
_WITHOUT_SIGNATURES = re.compile(r"gemini-[12][.-]")


class GeminiProvider:
    """Gemini models; OpenAI-style messages and tools are translated on the way in and out."""

    name = "gemini"

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
            from google import genai
            from google.genai import errors, types
        except ImportError as exc:
            raise ProviderUnavailable("gemini", "gemini") from exc
        self.model = model
        self._types = types
        self._api_error: type[Exception] = errors.APIError
        http_options: dict[str, Any] = {"timeout": int(timeout * 1000)}  # the SDK counts milliseconds
        if base_url:
            http_options["base_url"] = base_url
        if hasattr(types, "HttpRetryOptions"):  # SDKs before 1.2x do not retry at all
            http_options["retry_options"] = types.HttpRetryOptions(attempts=max(0, max_retries) + 1)
        # Without an api_key the SDK reads GEMINI_API_KEY / GOOGLE_API_KEY.
        self._client = genai.Client(api_key=api_key, http_options=types.HttpOptions(**http_options))
        self._signatures: OrderedDict[str, bytes] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> GeminiProvider:
        if not settings.llm_model:
            raise ValueError("LLM provider 'gemini' needs a model name: set ENGRAM_LLM_MODEL")
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
        types = self._types
        system, contents = self._contents(messages)
        config: dict[str, Any] = {"temperature": temperature}
        if system:
            config["system_instruction"] = system
        if max_tokens is not None:
            config["max_output_tokens"] = max_tokens
        if json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = json_schema
        elif tools:
            config["tools"] = [types.Tool(function_declarations=[self._declaration(t) for t in tools])]
            config["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(disable=True)
            if tool_choice is not None:
                config["tool_config"] = self._tool_config(tool_choice)
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model, contents=contents, config=types.GenerateContentConfig(**config)
            )
        except self._api_error as exc:
            raise self._error(f"HTTP {getattr(exc, 'code', '?')}: {excerpt(str(exc))}") from exc
        except Exception as exc:  # the SDK lets transport errors (timeouts, resets) through as is
            raise self._error(f"{type(exc).__name__}: {excerpt(str(exc))}") from exc
        return self._parse(response)

    async def aclose(self) -> None:
        close = getattr(self._client.aio, "aclose", None)  # older SDKs have nothing to close
        if close is not None:
            await close()

    def _contents(self, messages: list[dict[str, Any]]) -> tuple[str, list[Any]]:
        """(system instruction, contents); consecutive turns of one role are merged because the
        responses to parallel calls must arrive in one turn."""
        types = self._types
        system: list[str] = []
        call_names: dict[str, str] = {}
        turns: list[tuple[str, list[Any]]] = []
        for message in messages:
            role = message.get("role")
            content = content_text(message.get("content"))
            if role == "system":
                system.append(content)
                continue
            parts: list[Any] = []
            if role == "assistant":
                role = "model"
                if content:
                    parts.append(types.Part(text=content))
                for index, call in enumerate(message.get("tool_calls") or []):
                    call_names[call.get("id", "")] = call["function"]["name"]
                    parts.append(self._function_call_part(call, first=index == 0))
            elif role == "tool":
                role = "user"
                call_id = message.get("tool_call_id", "")
                response = types.FunctionResponse(
                    id=gemini_id(call_id), name=call_names.get(call_id, "tool"), response={"output": content}
                )
                parts.append(types.Part(function_response=response))
            else:
                role = "user"
                parts.append(types.Part(text=content))
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(parts)
            elif parts:
                turns.append((role, parts))
        contents = [types.Content(role=role, parts=parts) for role, parts in turns]
        return "\n\n".join(part for part in system if part), contents

    def _function_call_part(self, call: dict[str, Any], *, first: bool) -> Any:
        types = self._types
        name = call["function"]["name"]
        arguments = decode_tool_arguments(self.name, name, call["function"].get("arguments"))
        signature = self._signatures.get(call.get("id", ""))
        if signature is None and first and not _WITHOUT_SIGNATURES.match(self.model):
            signature = SKIP_SIGNATURE
        return types.Part(
            function_call=types.FunctionCall(id=gemini_id(call.get("id")), name=name, args=arguments),
            thought_signature=signature,
        )

    def _declaration(self, tool: dict[str, Any]) -> Any:
        function = tool.get("function", tool)
        return self._types.FunctionDeclaration(
            name=function["name"],
            description=function.get("description", ""),
            parameters_json_schema=function.get("parameters") or {"type": "object", "properties": {}},
        )

    def _tool_config(self, tool_choice: str | dict[str, Any]) -> Any:
        types = self._types
        forced = tool_name_from_choice(tool_choice)
        mode = "ANY" if forced else {"required": "ANY", "none": "NONE"}.get(str(tool_choice), "AUTO")
        calling = types.FunctionCallingConfig(mode=mode, allowed_function_names=[forced] if forced else None)
        return types.ToolConfig(function_calling_config=calling)

    def _parse(self, response: Any) -> LLMResponse:
        candidates = response.candidates or []
        if not candidates:
            feedback = getattr(response, "prompt_feedback", None)
            raise self._error(f"returned no answer (prompt feedback: {feedback})")
        candidate = candidates[0]
        texts: list[str] = []
        calls: list[ToolCall] = []
        for part in (candidate.content.parts if candidate.content else None) or []:
            call = part.function_call
            if call:
                call_id = call.id or f"{LOCAL_ID_PREFIX}{uuid.uuid4().hex[:12]}"
                calls.append(ToolCall(call_id, call.name or "", dict(call.args or {})))
                if part.thought_signature:
                    self._remember_signature(call_id, part.thought_signature)
            elif part.text and not getattr(part, "thought", False):
                texts.append(part.text)
        reason = getattr(candidate.finish_reason, "value", candidate.finish_reason)
        finish = FINISH_REASONS.get(str(reason), str(reason).lower() if reason else None)
        return LLMResponse(
            text="".join(texts) or None,
            tool_calls=calls,
            usage=usage_of(response.usage_metadata),
            finish_reason="tool_calls" if calls else finish,
        )

    def _remember_signature(self, call_id: str, signature: bytes) -> None:
        self._signatures[call_id] = signature
        while len(self._signatures) > SIGNATURES_KEPT:
            self._signatures.popitem(last=False)

    def _error(self, what: str) -> LLMError:
        return LLMError(f"LLM provider 'gemini' (model {self.model}) failed: {what}")


def gemini_id(call_id: str | None) -> str | None:
    return None if not call_id or call_id.startswith(LOCAL_ID_PREFIX) else call_id


def usage_of(meta: Any) -> TokenUsage:
    if meta is None:
        return TokenUsage()
    # Thinking tokens are billed as output.
    thoughts = getattr(meta, "thoughts_token_count", 0) or 0
    return TokenUsage(meta.prompt_token_count or 0, (meta.candidates_token_count or 0) + thoughts)
