"""An LLM provider wrapper that counts calls, failures and tokens for /metrics."""

from __future__ import annotations

from typing import Any

from engram.llm.base import LLMProvider, LLMResponse
from engram.metrics import REGISTRY


class MeteredProvider:
    def __init__(self, inner: LLMProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model

    async def complete(self, messages: list[dict[str, Any]], **options: Any) -> LLMResponse:
        try:
            response = await self.inner.complete(messages, **options)
        except Exception:
            REGISTRY.count("engram_llm_calls_total", provider=self.name, outcome="error")
            raise
        REGISTRY.count("engram_llm_calls_total", provider=self.name, outcome="ok")
        REGISTRY.count("engram_llm_tokens_total", response.usage.input_tokens, provider=self.name, kind="input")
        REGISTRY.count("engram_llm_tokens_total", response.usage.output_tokens, provider=self.name, kind="output")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
