"""The prompts retain, consolidation and reflect would send for a bank, rendered without an LLM call.

Each operation calls the same message builder the real operation calls, with fixed placeholders for
the runtime data (the text retained, the facts consolidated, the question asked), so a preview cannot
drift from what is sent. A message is cut into blocks: the configured values (missions, custom
instructions) are `config` blocks naming their setting, the rest is `builtin`; the active blocks
concatenate back to the exact text. A setting that is empty is listed as an inactive block.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput

if TYPE_CHECKING:
    from engram.services import Services

OPERATIONS = ("retain", "consolidation", "reflect")
RETAIN_CONTENT = "«the text being retained»"
RETAIN_CONTEXT = "«context supplied with the document»"
CONSOLIDATION_FACT = "«the batch of new facts being consolidated»"
CONSOLIDATION_OBSERVATION = "«the observations this bank already holds»"
REFLECT_QUERY = "«the question being asked»"

# The settings whose text lands in each operation's messages, in the order they appear.
PROMPT_FIELDS = {
    "retain": ("retain_mission", "retain_custom_instructions"),
    "consolidation": ("observations_mission",),
    "reflect": ("reflect_mission",),
}
# Settings that shape the run but not the prompt's wording.
RUN_SETTINGS = {
    "retain": (("retain_chunk_size", "text"), ("entities_allow_free_form", "boolean"),
               ("retain_extraction_mode", "choice")),
    "consolidation": (("enable_observations", "boolean"), ("consolidation_llm_batch_size", "text"),
                      ("max_observations_per_scope", "text"), ("consolidation_strategies", "complex")),
    "reflect": (("disposition_skepticism", "choice"), ("disposition_literalism", "choice"),
                ("disposition_empathy", "choice"), ("reflect_source_facts_max_tokens", "text")),
}


def _value_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value if isinstance(value, str) else str(value)


def _block(text: str, field: str = "", value: str | None = None, *, active: bool = True) -> dict[str, Any]:
    source = "config" if field else "builtin"
    return {"text": text, "source": source, "field": field, "section": "", "heading": "", "active": active,
            "value": value, "kind": "text", "choices": None, "editable": bool(field)}


def split_blocks(text: str, values: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """`text` as blocks: each configured value found (in order) is a config block, the text between
    them builtin blocks; values that are empty or absent become inactive blocks at the end."""
    blocks: list[dict[str, Any]] = []
    cursor = 0
    for field, value in values:
        at = text.find(value, cursor) if value else -1
        if at < 0:
            blocks.append(_block("", field, value, active=False))
            continue
        if at > cursor:
            blocks.append(_block(text[cursor:at]))
        blocks.append(_block(value, field, value))  # type: ignore[arg-type]
        cursor = at + len(value)  # type: ignore[arg-type]
    if cursor < len(text):
        blocks.append(_block(text[cursor:]))
    active = [b for b in blocks if b["active"]]
    return active + [b for b in blocks if not b["active"]]


def _retain_messages(config: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from engram.retain.extraction import build_messages, output_model
    from engram.retain.label_config import groups_from_config

    groups = groups_from_config(config)
    free_form = bool(config.get("entities_allow_free_form", True))
    messages = build_messages(
        RETAIN_CONTENT, said_at=None, context=RETAIN_CONTEXT, mission=config.get("retain_mission"),
        custom_instructions=config.get("retain_custom_instructions"), label_groups=groups, free_form=free_form,
    )
    return messages, output_model(groups, strict=True, free_form=free_form).model_json_schema()


def _consolidation_messages(config: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from engram.consolidate import prompt
    from engram.consolidate.strategies import settings_for_scope

    settings = settings_for_scope((), config)
    messages = prompt.build_messages(
        [prompt.ShownFact("F1", CONSOLIDATION_FACT, None)],
        [prompt.ShownObservation("O1", CONSOLIDATION_OBSERVATION, 1)],
        (),
        settings.observations_mission,
    )
    return messages, prompt.ConsolidationActions.model_json_schema()


async def _reflect_messages(services: Services, bank_id: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    from engram.reflect import prompt
    from engram.reflect.directives import active_directives

    mission = await services.pool.fetchval("SELECT mission FROM banks WHERE bank_id = $1", bank_id)
    directives = await active_directives(services.pool, bank_id, None, True)
    return [
        {"role": "system", "content": prompt.system_prompt(config, directives, mission)},
        {"role": "user", "content": prompt.user_prompt(REFLECT_QUERY, None)},
    ]


async def preview_prompt(services: Services, bank_id: str, operation: str, strategy: str | None) -> dict[str, Any]:
    """The contract's PromptPreviewResponse for `operation` under the bank's effective config."""
    if operation not in OPERATIONS:
        raise InvalidInput("operation", f"must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    if strategy is not None:
        raise InvalidInput("strategy", "Engram has no named retain strategies; leave it out")
    config = await services.bank_config(bank_id)
    schema: dict[str, Any] | None = None
    skipped = None
    if operation == "retain":
        messages, schema = _retain_messages(config)
    elif operation == "consolidation":
        messages, schema = _consolidation_messages(config)
        if not config.get("enable_observations", True):
            skipped = "enable_observations is off for this bank: consolidation sends no prompt"
        elif services.llm is None:
            skipped = "no LLM is configured: consolidation does not run"
    else:
        messages = await _reflect_messages(services, bank_id, config)
    values = [(field, _value_text(config.get(field))) for field in PROMPT_FIELDS[operation]]
    if operation == "reflect" and not values[0][1]:
        values = [("reflect_mission", await services.pool.fetchval(
            "SELECT mission FROM banks WHERE bank_id = $1", bank_id))]
    shown = []
    for message in messages:
        # Each configured value is claimed by the first message that contains it.
        present = [(f, v) for f, v in values if v and v in message["content"]]
        values = [(f, v) for f, v in values if (f, v) not in present]
        shown.append({"role": message["role"], "blocks": split_blocks(message["content"], present)})
    if values and shown:  # settings not in any message: inactive blocks in the system message
        shown[0]["blocks"] += [_block("", f, v, active=False) for f, v in values]
    return {
        "messages": shown,
        "strategy": None,
        "strategies": [],
        "run_settings": [{"field": f, "value": _value_text(config.get(f)), "kind": kind, "editable": True}
                         for f, kind in RUN_SETTINGS[operation]],
        "response_schema": schema,
        "skipped_reason": skipped,
    }
