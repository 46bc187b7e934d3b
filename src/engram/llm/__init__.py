"""LLM providers behind one interface, and `from_settings` to pick one.

Provider modules are imported only when chosen, so `import engram.llm` costs nothing and the
Anthropic and Gemini SDKs stay optional extras.
"""

from __future__ import annotations

from typing import Any

from engram.llm.base import LLMProvider, LLMResponse, TokenUsage, ToolCall
from engram.llm.structured import generate_structured

# Names accepted in ENGRAM_LLM_PROVIDER for servers speaking OpenAI's chat-completions API.
OPENAI_COMPATIBLE = (
    "openai",
    "openai-compatible",
    "vllm",
    "ollama",
    "lmstudio",
    "llamacpp",
    "groq",
    "openrouter",
)
PROVIDERS = ("none", *OPENAI_COMPATIBLE, "anthropic", "gemini", "local")

_ALIASES = {
    "openai_compatible": "openai-compatible",
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama_cpp": "llamacpp",
    "lm-studio": "lmstudio",
    "lm_studio": "lmstudio",
    "google": "gemini",
    "claude": "anthropic",
}


def provider_name(raw: str) -> str:
    """The canonical provider name for a setting value (case and common spellings forgiven)."""
    name = (raw or "none").strip().lower()
    return _ALIASES.get(name, name)


# Hosted services that refuse calls without a key (the SDK's own variable counts for Anthropic and Gemini).
_KEY_VARIABLES = {
    "openai": (),
    "groq": (),
    "openrouter": (),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
# Providers that talk to a server you run: they work with no model name (llama.cpp serves what it loaded).
_MODEL_OPTIONAL = ("none", "openai", "llamacpp")


def check_settings(settings: Any) -> list[str]:
    """Warnings about the LLM settings; ValueError (saying what to set) when they cannot work."""
    import difflib
    import os

    name = provider_name(settings.llm_provider)
    if name not in PROVIDERS:
        close = difflib.get_close_matches(name, [*PROVIDERS, *_ALIASES], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"unknown LLM provider '{settings.llm_provider}'{hint}: set ENGRAM_LLM_PROVIDER to one of "
                         f"{', '.join(PROVIDERS)}")
    if name not in _MODEL_OPTIONAL and not settings.llm_model:
        raise ValueError(f"LLM provider '{name}' needs a model name: set ENGRAM_LLM_MODEL")
    hosted = name in _KEY_VARIABLES or (name == "openai-compatible" and not settings.llm_base_url)
    has_key = settings.llm_api_key or any(os.environ.get(v) for v in _KEY_VARIABLES.get(name, ()))
    if hosted and not has_key:
        return [f"LLM provider '{name}' has no API key: set ENGRAM_LLM_API_KEY, or its calls will be refused"]
    return []


def from_settings(settings: Any, **overrides: Any) -> LLMProvider | None:
    """The provider `settings.llm_provider` names, or None when it is "none".

    `overrides` go to the provider's constructor (tests use them, e.g. `retry_backoff=0.01`).
    """
    name = provider_name(settings.llm_provider)
    if name == "none":
        return None
    if name in OPENAI_COMPATIBLE:
        from engram.llm.openai_compat import OpenAICompatibleProvider

        return OpenAICompatibleProvider.from_settings(settings, name=name, **overrides)
    if name == "anthropic":
        from engram.llm.anthropic import AnthropicProvider

        return AnthropicProvider.from_settings(settings, **overrides)
    if name == "gemini":
        from engram.llm.gemini import GeminiProvider

        return GeminiProvider.from_settings(settings, **overrides)
    if name == "local":
        from engram.llm.local import LocalProvider

        return LocalProvider.from_settings(settings, **overrides)
    raise ValueError(f"unknown LLM provider '{settings.llm_provider}': use one of {', '.join(PROVIDERS)}")


__all__ = [
    "LLMProvider",
    "LLMResponse",
    "OPENAI_COMPATIBLE",
    "PROVIDERS",
    "TokenUsage",
    "check_settings",
    "ToolCall",
    "from_settings",
    "generate_structured",
    "provider_name",
]
