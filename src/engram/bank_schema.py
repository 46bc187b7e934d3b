"""The bank settings and their typed ranges: the one schema behind the config API, the
`ENGRAM_*`/`HINDSIGHT_API_*` environment, bank templates, the stored overrides read back, and the
control plane's config form (which reads it from `GET /v1/bank-config-schema`).

A value outside its range would poison the bank (a chunk size of -1 loops forever, a disposition of 99
breaks every listing of the bank), so ranges are checked wherever a value enters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engram.retain.chunking import MIN_CHUNK_CHARS

Choices = tuple[str, ...] | Callable[[], Iterable[str]]
TEXT_MAX_CHARS = 20_000  # missions and instructions go into every prompt: a novel is a mistake
UNLIMITED = -1  # the "no limit" value of the token and count caps, as in Hindsight

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@dataclass(frozen=True)
class BankSetting:
    """One setting a bank may override. `kind` is the JSON type accepted; numbers have an inclusive
    `minimum`/`maximum` (`exclusive_minimum` makes the lower bound strict); strings may have
    `choices` and a `max_length`; a list with `choices` may only hold those strings."""

    name: str
    kind: type | tuple[type, ...]
    default: Any
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: Choices | None = None
    max_length: int | None = None

    @property
    def kinds(self) -> tuple[type, ...]:
        return self.kind if isinstance(self.kind, tuple) else (self.kind,)

    def allowed(self) -> tuple[str, ...] | None:
        if self.choices is None:
            return None
        return tuple(self.choices) if isinstance(self.choices, tuple) else tuple(self.choices())

    def type_name(self) -> str:
        return " or ".join(_JSON_TYPES[kind] for kind in self.kinds)

    def problem(self, value: Any) -> str | None:
        """Why `value` is not valid for this setting, or None (None itself is valid: "no override")."""
        if value is None:
            return None
        if not _type_ok(self.kinds, value):
            name = self.type_name()
            return f"must be {'an' if name[0] in 'aeiou' else 'a'} {name}"
        if isinstance(value, (int, float)):
            return self._number_problem(value)
        if isinstance(value, str):
            return self._text_problem(value)
        if isinstance(value, list) and self.choices is not None:
            allowed = self.allowed() or ()
            unknown = [item for item in value if item not in allowed]
            if unknown:
                return f"unknown value(s) {', '.join(map(repr, unknown))}; expected any of {', '.join(allowed)}"
        return None

    def _number_problem(self, value: float) -> str | None:
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        low, high = self.minimum, self.maximum
        below = low is not None and (value <= low if self.exclusive_minimum else value < low)
        if below or (high is not None and value > high):
            return f"must be {self.range_text()} (got {value})"
        return None

    def _text_problem(self, value: str) -> str | None:
        allowed = self.allowed()
        if allowed is not None and value not in allowed:
            return f"must be one of {', '.join(allowed)} (got {value!r})"
        if self.max_length is not None and len(value) > self.max_length:
            return f"must be at most {self.max_length} characters (got {len(value)})"
        return None

    def range_text(self) -> str:
        """The range in words, e.g. "between 1 and 5" or "-1 (no limit) or between 0 and 1000000"."""
        if self.minimum is None and self.maximum is None:
            return "any"
        if self.maximum is None:
            return f"{'greater than' if self.exclusive_minimum else 'at least'} {_number(self.minimum)}"
        if self.exclusive_minimum:
            return f"greater than {_number(self.minimum)}, at most {_number(self.maximum)}"
        if self.minimum == UNLIMITED:
            return f"-1 (no limit) or between 0 and {_number(self.maximum)}"
        return f"between {_number(self.minimum)} and {_number(self.maximum)}"

    def json_schema(self) -> dict[str, Any]:
        """This setting as a JSON-schema property (what the control plane builds its form from)."""
        types = [_JSON_TYPES[kind] for kind in self.kinds]
        schema: dict[str, Any] = {"type": [*types, "null"], "default": self.default}
        if self.description:
            schema["description"] = self.description
        if self.minimum is not None:
            schema["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        allowed = self.allowed()
        if allowed is not None and list in self.kinds:
            schema["items"] = {"type": "string", "enum": list(allowed)}
        elif allowed is not None:
            schema["enum"] = [*allowed, None]
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        return schema


def _type_ok(kinds: tuple[type, ...], value: Any) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    for kind in kinds:
        if kind is float and isinstance(value, (int, float)):
            return True
        if isinstance(value, kind):
            return True
    return False


def _number(value: float | None) -> str:
    return str(int(value)) if value is not None and float(value).is_integer() else str(value)


# Hindsight 1.1.0's MCP tool names: a bank template written for Hindsight may list them in
# `mcp_enabled_tools`; the ones Engram does not have are simply never offered.
HINDSIGHT_MCP_TOOLS = (
    "retain", "sync_retain", "recall", "reflect", "create_mental_model", "list_mental_models",
    "get_mental_model", "update_mental_model", "delete_mental_model", "refresh_mental_model",
    "clear_mental_model", "list_banks", "create_bank", "get_bank", "get_bank_stats", "update_bank",
    "delete_bank", "clear_memories", "list_directives", "create_directive", "delete_directive",
    "list_memories", "get_memory", "list_documents", "get_document", "delete_document",
    "list_operations", "get_operation", "cancel_operation", "list_tags",
)


def _mcp_tool_names() -> list[str]:
    from engram.mcp.tools import TOOLS

    return sorted({*TOOLS, *HINDSIGHT_MCP_TOOLS})


def _count(name: str, default: int | None, low: int, high: int, description: str = "") -> BankSetting:
    return BankSetting(name, int, default, description, minimum=low, maximum=high)


def _text(name: str, description: str = "") -> BankSetting:
    return BankSetting(name, str, None, description, max_length=TEXT_MAX_CHARS)


def _flag(name: str, default: bool, description: str = "") -> BankSetting:
    return BankSetting(name, bool, default, description)


def _settings(*items: BankSetting) -> dict[str, BankSetting]:
    return {item.name: item for item in items}


# The bank-configurable settings, with Hindsight 1.1.0's names, defaults and (where it has them) ranges.
BANK_SETTINGS: dict[str, BankSetting] = _settings(
    _text("reflect_mission", "Mission that shapes reflect answers"),
    _count("reflect_source_facts_max_tokens", 4096, UNLIMITED, 1_000_000),
    _text("retain_mission", "What retain should focus on extracting"),
    BankSetting("retain_extraction_mode", str, "concise",
                choices=("concise", "verbose", "custom", "verbatim", "chunks")),
    _text("retain_custom_instructions"),
    _count("retain_chunk_size", 3000, MIN_CHUNK_CHARS, 1_000_000, "Characters per extraction chunk"),
    _count("retain_structured_chunk_size", 3000, MIN_CHUNK_CHARS, 1_000_000),
    _count("retain_max_attachments_per_chunk", 0, 0, 100),
    BankSetting("retain_default_strategy", str, None, max_length=200),
    BankSetting("retain_strategies", dict, None),
    _count("retain_chunk_batch_size", 8, 1, 1000),
    _flag("store_document_text", True),
    BankSetting("entity_labels", list, None),
    _flag("entities_allow_free_form", True),
    _flag("enable_observations", True),
    _text("observations_mission"),
    _count("max_observations_per_scope", UNLIMITED, UNLIMITED, 1_000_000),
    BankSetting("observation_scope_limits", list, None),
    BankSetting("consolidation_strategies", list, None),
    BankSetting("default_observation_scopes", (str, list), None),
    _flag("enable_auto_consolidation", True),
    _flag("consolidation_use_decision_model", False),
    _count("consolidation_llm_parallelism", 1, 1, 64),
    _count("consolidation_max_memories_per_round", 100, 1, 10_000),
    _count("consolidation_llm_batch_size", 8, 1, 100),
    BankSetting("consolidation_dedup_threshold", float, 0.97, "Cosine at which a new observation is a "
                "near-duplicate (1.0 disables the check)", minimum=0.0, maximum=1.0),
    _count("consolidation_source_facts_max_tokens", UNLIMITED, UNLIMITED, 10_000_000),
    _count("consolidation_source_facts_max_tokens_per_observation", UNLIMITED, UNLIMITED, 10_000_000),
    _count("mental_model_min_refresh_interval_seconds", 0, 0, 31_536_000),
    BankSetting("reflect_default_options", dict, None),
    _flag("enable_text_search", True),
    _flag("enable_temporal_retrieval", True),
    _flag("enable_graph_retrieval", True),
    _flag("enable_reranking", True),
    _count("recall_max_tokens", 4096, 1, 1_000_000),
    _flag("recall_include_chunks", False),
    _flag("recall_prefer_observations", False),
    _count("recall_chunks_max_tokens", 8192, 0, 1_000_000),
    _count("recall_budget_fixed_low", 100, 1, 10_000, "Candidates per arm for budget=low"),
    _count("recall_budget_fixed_mid", 300, 1, 10_000, "Candidates per arm for budget=mid"),
    _count("recall_budget_fixed_high", 1000, 1, 10_000, "Candidates per arm for budget=high"),
    _count("disposition_skepticism", 3, 1, 5),
    _count("disposition_literalism", 3, 1, 5),
    _count("disposition_empathy", 3, 1, 5),
    BankSetting("mcp_enabled_tools", list, None, "MCP tools this bank offers (null = all)",
                choices=_mcp_tool_names),
    _flag("audit_log_enabled", False),
    # Accepted and stored for Hindsight compatibility (templates carry them); Engram does not act on them.
    _flag("reflect_use_decision_model", False),
    _flag("mental_model_refresh_use_decision_model", False),
    _flag("mental_model_delta_use_decision_model", False),
    BankSetting("knowledge_page_default_trigger", dict, None),
    BankSetting("llm_gemini_safety_settings", list, None),
    BankSetting("recall_budget_function", str, "fixed", choices=("fixed", "adaptive")),
    BankSetting("recall_budget_adaptive_low", float, None, minimum=0, maximum=10, exclusive_minimum=True),
    BankSetting("recall_budget_adaptive_mid", float, None, minimum=0, maximum=10, exclusive_minimum=True),
    BankSetting("recall_budget_adaptive_high", float, None, minimum=0, maximum=10, exclusive_minimum=True),
    _count("recall_budget_min", None, 1, 10_000),
    _count("recall_budget_max", None, 1, 10_000),
    BankSetting("memory_defense", dict, None),
)


def config_json_schema() -> dict[str, Any]:
    """Every bank setting as one JSON schema (an object of optional properties)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Engram bank settings",
        "type": "object",
        "additionalProperties": False,
        "properties": {name: setting.json_schema() for name, setting in BANK_SETTINGS.items()},
    }


def settings_table() -> str:
    """The README's table of bank settings, generated from the schema (a test keeps them equal)."""
    lines = ["| Setting | Type | Range | Default |", "|---|---|---|---|"]
    for setting in BANK_SETTINGS.values():
        allowed = setting.allowed()
        if allowed is not None and list in setting.kinds:
            rule = "MCP tool names (Engram's, or Hindsight 1.1.0's)"
        elif allowed is not None:
            rule = "one of " + ", ".join(f"`{choice}`" for choice in allowed)
        elif setting.max_length is not None:
            rule = f"at most {setting.max_length:,} characters"
        elif setting.minimum is not None or setting.maximum is not None:
            rule = setting.range_text()
        else:
            rule = "—"
        default = "null" if setting.default is None else _json_literal(setting.default)
        lines.append(f"| `{setting.name}` | {setting.type_name()} | {rule} | `{default}` |")
    return "\n".join(lines)


def _json_literal(value: Any) -> str:
    import json

    return json.dumps(value)
