"""All settings in one place: server settings from the environment, bank settings from
environment defaults overridden per bank.

Every setting is read from `ENGRAM_<NAME>` first, then from Hindsight's `HINDSIGHT_API_<NAME>`, so a
Hindsight deployment can switch to Engram without renaming anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_PREFIXES = ("ENGRAM_", "HINDSIGHT_API_")


def read_env(name: str, environ: dict[str, str] | None = None) -> str | None:
    """The value of setting `name` (lower-case) from the first env prefix that defines it."""
    env = os.environ if environ is None else environ
    for prefix in ENV_PREFIXES:
        value = env.get(prefix + name.upper())
        if value is not None and value != "":
            return value
    return None


def parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


@dataclass(frozen=True)
class BankSetting:
    """One setting a bank may override. `kind` is the JSON type accepted for it."""

    name: str
    kind: type | tuple[type, ...]
    default: Any
    description: str = ""


def _settings(*items: BankSetting) -> dict[str, BankSetting]:
    return {item.name: item for item in items}


# The bank-configurable settings, with Hindsight 1.1.0's names and defaults.
BANK_SETTINGS: dict[str, BankSetting] = _settings(
    BankSetting("reflect_mission", str, None, "Mission that shapes reflect answers"),
    BankSetting("reflect_source_facts_max_tokens", int, 4096),
    BankSetting("retain_mission", str, None, "What retain should focus on extracting"),
    BankSetting("retain_extraction_mode", str, "concise"),
    BankSetting("retain_custom_instructions", str, None),
    BankSetting("retain_chunk_size", int, 3000, "Characters per extraction chunk"),
    BankSetting("retain_structured_chunk_size", int, 3000),
    BankSetting("retain_max_attachments_per_chunk", int, 0),
    BankSetting("retain_default_strategy", str, None),
    BankSetting("retain_strategies", dict, None),
    BankSetting("retain_chunk_batch_size", int, 8),
    BankSetting("store_document_text", bool, True),
    BankSetting("entity_labels", list, None),
    BankSetting("entities_allow_free_form", bool, True),
    BankSetting("enable_observations", bool, True),
    BankSetting("observations_mission", str, None),
    BankSetting("max_observations_per_scope", int, -1),
    BankSetting("observation_scope_limits", list, None),
    BankSetting("consolidation_strategies", list, None),
    BankSetting("default_observation_scopes", (str, list), None),
    BankSetting("enable_auto_consolidation", bool, True),
    BankSetting("consolidation_use_decision_model", bool, False),
    BankSetting("consolidation_llm_parallelism", int, 1),
    BankSetting("consolidation_max_memories_per_round", int, 100),
    BankSetting("consolidation_llm_batch_size", int, 8),
    BankSetting("consolidation_dedup_threshold", float, 0.97),
    BankSetting("consolidation_source_facts_max_tokens", int, -1),
    BankSetting("consolidation_source_facts_max_tokens_per_observation", int, -1),
    BankSetting("mental_model_min_refresh_interval_seconds", int, 0),
    BankSetting("reflect_default_options", dict, None),
    BankSetting("enable_text_search", bool, True),
    BankSetting("enable_temporal_retrieval", bool, True),
    BankSetting("enable_graph_retrieval", bool, True),
    BankSetting("enable_reranking", bool, True),
    BankSetting("recall_max_tokens", int, 4096),
    BankSetting("recall_include_chunks", bool, False),
    BankSetting("recall_prefer_observations", bool, False),
    BankSetting("recall_chunks_max_tokens", int, 8192),
    BankSetting("recall_budget_fixed_low", int, 100),
    BankSetting("recall_budget_fixed_mid", int, 300),
    BankSetting("recall_budget_fixed_high", int, 1000),
    BankSetting("disposition_skepticism", int, 3),
    BankSetting("disposition_literalism", int, 3),
    BankSetting("disposition_empathy", int, 3),
    BankSetting("mcp_enabled_tools", list, None),
    BankSetting("audit_log_enabled", bool, False),
    # Accepted and stored for Hindsight compatibility (templates carry them); Engram does not act on them.
    BankSetting("reflect_use_decision_model", bool, False),
    BankSetting("mental_model_refresh_use_decision_model", bool, False),
    BankSetting("mental_model_delta_use_decision_model", bool, False),
    BankSetting("knowledge_page_default_trigger", dict, None),
    BankSetting("llm_gemini_safety_settings", list, None),
    BankSetting("recall_budget_function", str, "fixed"),
    BankSetting("recall_budget_adaptive_low", float, None),
    BankSetting("recall_budget_adaptive_mid", float, None),
    BankSetting("recall_budget_adaptive_high", float, None),
    BankSetting("recall_budget_min", int, None),
    BankSetting("recall_budget_max", int, None),
    BankSetting("memory_defense", dict, None),
)


def normalise_setting_name(key: str) -> str:
    """Accept a field name (`retain_chunk_size`) or an env name (`HINDSIGHT_API_RETAIN_CHUNK_SIZE`)."""
    for prefix in ENV_PREFIXES:
        if key.upper().startswith(prefix):
            return key[len(prefix) :].lower()
    return key


def coerce_env_value(setting: BankSetting, raw: str) -> Any:
    """Turn an env string into the setting's type; JSON for lists and objects."""
    import json

    kinds = setting.kind if isinstance(setting.kind, tuple) else (setting.kind,)
    if bool in kinds:
        return parse_bool(raw)
    if int in kinds:
        return int(raw)
    if float in kinds:
        return float(raw)
    if list in kinds or dict in kinds:
        stripped = raw.strip()
        if stripped.startswith(("[", "{")):
            return json.loads(stripped)
        if str in kinds:
            return raw
        raise ValueError(f"{setting.name} must be JSON")
    return raw


def env_bank_defaults(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Bank settings as the environment sets them; a malformed env value keeps the default."""
    import logging

    resolved: dict[str, Any] = {}
    for name, setting in BANK_SETTINGS.items():
        raw = read_env(name, environ)
        if raw is None:
            resolved[name] = setting.default
            continue
        try:
            resolved[name] = coerce_env_value(setting, raw)
        except ValueError as exc:
            logging.getLogger("engram.settings").warning("ignoring %s: %s", name, exc)
            resolved[name] = setting.default
    return resolved


def default_home() -> Path:
    return Path(read_env("home") or Path.home() / ".engram").expanduser()


@dataclass(frozen=True)
class Settings:
    """Server-wide settings. Build with `Settings.from_env()`; tests pass values directly."""

    home: Path = field(default_factory=default_home)
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8888
    llm_provider: str = "none"
    llm_api_key: str | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_timeout: float = 120.0
    llm_max_retries: int = 2
    llm_context_tokens: int = 4096  # the context window of the `local` provider's model
    llm_vision: bool = False  # the (OpenAI-compatible) model reads images: retain sends it image blocks
    reranker_model_path: str | None = None
    worker_enabled: bool = True
    worker_poll_interval: float = 0.5
    operation_lease_seconds: float = 300.0
    api_keys: str | None = None  # "key1,key2:bankA|bank-*" (see engram.api.auth); None = no auth
    tenant_api_key: str | None = None  # Hindsight's HINDSIGHT_API_TENANT_API_KEY: one key, every bank
    max_request_bytes: int = 10 * 1024 * 1024
    mcp_token: str | None = None  # MCP endpoints want `Authorization: Bearer <token>` when set
    bank_defaults: dict[str, Any] = field(default_factory=env_bank_defaults)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        def get(name: str, default: Any) -> Any:
            raw = read_env(name, environ)
            if raw is None:
                return default
            if isinstance(default, bool):
                return parse_bool(raw)
            if isinstance(default, int):
                return int(raw)
            if isinstance(default, float):
                return float(raw)
            return raw

        provider = (get("llm_provider", None) or "").lower() or None
        api_key = get("llm_api_key", None)
        if provider is None:
            provider = "openai" if api_key else "none"
        return cls(
            home=default_home() if environ is None else Path(get("home", str(Path.home() / ".engram"))),
            database_url=get("database_url", None),
            host=get("host", "127.0.0.1"),
            port=get("port", 8888),
            llm_provider=provider,
            llm_api_key=api_key,
            llm_model=get("llm_model", None),
            llm_base_url=get("llm_base_url", None),
            llm_timeout=get("llm_timeout", 120.0),
            llm_max_retries=get("llm_max_retries", 2),
            llm_context_tokens=get("llm_context_tokens", 4096),
            llm_vision=get("llm_vision", False),
            reranker_model_path=get("reranker_model_path", None),
            worker_enabled=get("worker_enabled", True),
            worker_poll_interval=get("worker_poll_interval", 0.5),
            operation_lease_seconds=get("operation_lease_seconds", 300.0),
            api_keys=get("api_keys", None),
            tenant_api_key=get("tenant_api_key", None),
            max_request_bytes=get("max_request_bytes", 10 * 1024 * 1024),
            mcp_token=get("mcp_token", None) or get("mcp_auth_token", None),
            bank_defaults=env_bank_defaults(environ),
        )

    @property
    def llm_configured(self) -> bool:
        return self.llm_provider not in ("none", "")
