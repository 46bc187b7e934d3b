"""What retain would extract from some content, with nothing stored: the chunks, their facts (with
the bank's config, or the overrides of the request), and the LLM tokens it took."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.errors import InvalidInput
from engram.llm.base import TokenUsage
from engram.retain.chunking import chunk_text
from engram.retain.facts import ExtractedFact
from engram.retain.label_config import groups_from_config, parse_label_groups
from engram.retain.pipeline import chunks_at_once
from engram.retain.prepare import content_text, parse_item_timestamp
from engram.together import run_together

if TYPE_CHECKING:
    from engram.services import Services

OVERRIDES = ("retain_mission", "retain_custom_instructions", "retain_chunk_size", "entities_allow_free_form")


def attachment_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The image and file blocks of block content, as ExtractedFactAttachment."""
    if isinstance(content, str):
        return []
    return [
        {"block_index": i, "type": b["type"], "media_type": (b.get("source") or {}).get("media_type", "")}
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") in ("image", "file")
    ]


async def dry_run_extract(services: Services, bank_id: str, request: dict[str, Any]) -> dict[str, Any]:
    text = content_text(request["content"], "content").strip()
    if not text:
        raise InvalidInput("content", "must not be empty")
    config = dict(await services.bank_config(bank_id))
    config.update({k: request[k] for k in OVERRIDES if request.get(k) is not None})
    groups = groups_from_config(config)
    if request.get("entity_labels") is not None:
        try:
            groups = parse_label_groups(request["entity_labels"])
        except ValueError as exc:
            raise InvalidInput("entity_labels", str(exc)) from None
    said_at = parse_item_timestamp(request.get("timestamp"), "timestamp", datetime.now(UTC))
    chunks = chunk_text(text, int(config.get("retain_chunk_size") or 3000))
    # The chunks at once, as a retain takes them (it sent them one after another until session 35).
    at_once = asyncio.Semaphore(chunks_at_once(services))

    async def extract(chunk: str) -> tuple[list[ExtractedFact], TokenUsage]:
        async with at_once:
            if services.llm is None:
                from engram.retain.offline import extract_offline

                return await asyncio.to_thread(extract_offline, chunk, said_at=said_at), TokenUsage()
            from engram.retain.extraction import extract_with_llm

            return await extract_with_llm(
                services.llm, chunk, said_at=said_at, context=request.get("context") or None,
                mission=config.get("retain_mission"), custom_instructions=config.get("retain_custom_instructions"),
                label_groups=groups,
            )

    extracted = await run_together(extract(chunk) for chunk in chunks)
    per_chunk = [facts for facts, _ in extracted]
    usage = sum((used for _, used in extracted), TokenUsage())
    attachments = attachment_blocks(request["content"])
    allow_free_form = bool(config.get("entities_allow_free_form", True))
    return {
        "facts": [
            _fact(fact, index, attachments, allow_free_form)
            for index, facts in enumerate(per_chunk) for fact in facts
        ],
        "chunks": [{"text": chunk, "fact_count": len(facts)} for chunk, facts in zip(chunks, per_chunk)],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens},
    }


def _fact(fact: ExtractedFact, chunk_index: int, attachments: list[dict[str, Any]], free_form: bool) -> dict[str, Any]:
    return {
        "text": fact.stored_text(),
        "fact_type": fact.fact_type,
        "occurred_start": fact.occurred_start.isoformat() if fact.occurred_start else None,
        "occurred_end": fact.occurred_end.isoformat() if fact.occurred_end else None,
        "entities": [*(fact.entities if free_form else []), *fact.labels],
        "chunk_index": chunk_index,
        "attachments": attachments,
    }

