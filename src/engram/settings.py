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

from engram.bank_schema import BANK_SETTINGS, BankSetting

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
    """Bank settings as the environment sets them; a malformed or out-of-range env value keeps the
    default (logged), so a typo in the environment cannot poison every bank."""
    import logging

    resolved: dict[str, Any] = {}
    for name, setting in BANK_SETTINGS.items():
        raw = read_env(name, environ)
        if raw is None:
            resolved[name] = setting.default
            continue
        try:
            value = coerce_env_value(setting, raw)
            problem = setting.problem(value)
            if problem is not None:
                raise ValueError(problem)
            resolved[name] = value
        except ValueError as exc:
            logging.getLogger("engram.settings").warning(
                "ignoring %s%s: %s; using the default %r", ENV_PREFIXES[0], name.upper(), exc, setting.default)
            resolved[name] = setting.default
    return resolved


def default_home() -> Path:
    return Path(read_env("home") or Path.home() / ".engram").expanduser()


def _at_least_one(name: str, value: int) -> int:
    """A count of slots: none would make everything that needs one wait for ever."""
    if value < 1:
        raise ValueError(f"ENGRAM_{name.upper()}={value} is not valid: expected at least 1")
    return value


def _not_negative(name: str, value: int) -> int:
    if value < 0:
        raise ValueError(f"ENGRAM_{name.upper()}={value} is not valid: expected 0 (automatic) or more")
    return value


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
    llm_max_concurrent: int = 32  # LLM calls in flight in the process at once (llm.call_slots)
    llm_context_tokens: int = 4096  # the context window of the `local` provider's model
    llm_vision: bool = False  # the (OpenAI-compatible) model reads images: retain sends it image blocks
    reranker_model_path: str | None = None
    embedding_model: str = "minilm"  # engram.models.embedder.MODELS; the database records which one it holds
    worker_enabled: bool = True
    worker_poll_interval: float = 0.5
    worker_max_slots: int = 0  # operations a worker runs at once; 0: 10 with an LLM, 2 without (worker.runner)
    operation_lease_seconds: float = 300.0
    import_wait_seconds: float = 60.0  # how long a request writing to a bank waits for an import into it
    retain_write_slots: int = 0  # retains writing to PostgreSQL at once (store.write_slots); 0: two a core
    api_keys: str | None = None  # "key1,key2:bankA|bank-*" (see engram.api.auth); None = no auth
    tenant_api_key: str | None = None  # Hindsight's HINDSIGHT_API_TENANT_API_KEY: one key, every bank
    max_request_bytes: int = 10 * 1024 * 1024
    max_upload_bytes: int = 100 * 1024 * 1024  # a transfer archive to import, files to retain
    body_read_timeout: float = 30.0  # seconds for a request's whole body to arrive (408 after)
    mcp_token: str | None = None  # MCP endpoints want `Authorization: Bearer <token>` when set
    webhook_allow_private_targets: bool = False  # let webhooks call loopback/private addresses (SSRF guard off)
    webhook_retry_base_seconds: float = 5.0  # first retry after this, then doubling
    webhook_max_attempts: int = 6
    audit_log_enabled: bool = False  # record mutating requests in the audit log
    audit_log_reads: bool = False  # and reads too
    audit_log_retention_days: int = -1  # -1 keeps entries forever
    llm_trace_enabled: bool = False  # store every LLM call (GET …/llm-requests)
    llm_trace_max_chars: int = 50_000  # per stored request / response
    llm_trace_retention_days: int = 1  # -1 keeps traces forever
    stats_link_counts_keep_seconds: float = 60.0  # a bank's link counts kept this long when counting is slow
    stats_link_counts_slow_ms: float = 200.0  # slow: counting took at least this
    bank_defaults: dict[str, Any] = field(default_factory=env_bank_defaults)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        def get(name: str, default: Any) -> Any:
            raw = read_env(name, environ)
            if raw is None:
                return default
            try:
                if isinstance(default, bool):
                    return parse_bool(raw)
                if isinstance(default, int):
                    return int(raw)
                if isinstance(default, float):
                    return float(raw)
            except ValueError:
                kind = "true or false" if isinstance(default, bool) else f"a number like {default}"
                raise ValueError(f"ENGRAM_{name.upper()}={raw!r} is not valid: expected {kind}") from None
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
            llm_max_concurrent=_at_least_one("llm_max_concurrent", get("llm_max_concurrent", 32)),
            llm_context_tokens=get("llm_context_tokens", 4096),
            llm_vision=get("llm_vision", False),
            reranker_model_path=get("reranker_model_path", None),
            embedding_model=get("embedding_model", "minilm").strip().lower(),
            worker_enabled=get("worker_enabled", True),
            worker_poll_interval=get("worker_poll_interval", 0.5),
            worker_max_slots=_not_negative("worker_max_slots", get("worker_max_slots", 0)),
            operation_lease_seconds=get("operation_lease_seconds", 300.0),
            import_wait_seconds=get("import_wait_seconds", 60.0),
            retain_write_slots=get("retain_write_slots", 0),
            api_keys=get("api_keys", None),
            tenant_api_key=get("tenant_api_key", None),
            max_request_bytes=get("max_request_bytes", 10 * 1024 * 1024),
            max_upload_bytes=get("max_upload_bytes", 100 * 1024 * 1024),
            body_read_timeout=get("body_read_timeout", 30.0),
            mcp_token=get("mcp_token", None) or get("mcp_auth_token", None),
            webhook_allow_private_targets=get("webhook_allow_private_targets", False),
            webhook_retry_base_seconds=get("webhook_retry_base_seconds", 5.0),
            webhook_max_attempts=get("webhook_max_attempts", 6),
            audit_log_enabled=get("audit_log_enabled", False),
            audit_log_reads=get("audit_log_reads", False),
            audit_log_retention_days=get("audit_log_retention_days", -1),
            llm_trace_enabled=get("llm_trace_enabled", False),
            llm_trace_max_chars=get("llm_trace_max_chars", 50_000),
            llm_trace_retention_days=get("llm_trace_retention_days", 1),
            stats_link_counts_keep_seconds=get("stats_link_counts_keep_seconds", 60.0),
            stats_link_counts_slow_ms=get("stats_link_counts_slow_ms", 200.0),
            bank_defaults=env_bank_defaults(environ),
        )

    @property
    def llm_configured(self) -> bool:
        return self.llm_provider not in ("none", "")
