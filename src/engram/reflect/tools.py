"""The tools reflect's agent may call, as OpenAI-format function definitions, and their executors.
Every tool applies the request's tag filters and fact types, and records what it showed so the
answer's `based_on` can only cite things the agent actually saw."""

from __future__ import annotations

import asyncio
import copy
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.types import RecallRequest, ReflectRequest

if TYPE_CHECKING:
    from engram.services import Services

RECALL_MAX_TOKENS = 2048
MENTAL_MODELS_PER_SEARCH = 5


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


QUERY = {"query": {"type": "string", "description": "What to look for"}}
IDS = {"type": "array", "items": {"type": "string"}}

TOOLS = [
    _function("search_mental_models", "Search curated answers to standing questions.", QUERY, ["query"]),
    _function("read_mental_models", "Read mental models in full by id.", {"ids": IDS}, ["ids"]),
    _function("search_observations", "Search consolidated observations; reports their freshness.", QUERY, ["query"]),
    _function("recall", "Search raw facts (ground truth) with their dates.", QUERY, ["query"]),
    _function("expand", "Show the source text (chunk and document) a memory came from.",
              {"memory_id": {"type": "string"}}, ["memory_id"]),
    _function(
        "done",
        "Finish with the answer and the ids of what you used.",
        {"answer": {"type": "string"}, "memory_ids": IDS, "observation_ids": IDS, "mental_model_ids": IDS},
        ["answer"],
    ),
]


@dataclass
class Seen:
    """Everything the tools have shown the agent, by id."""

    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    mental_models: dict[str, dict[str, Any]] = field(default_factory=dict)


class Toolbox:
    def __init__(self, services: Services, bank_id: str, request: ReflectRequest, config: dict[str, Any]) -> None:
        self.services = services
        self.bank_id = bank_id
        self.request = request
        self.config = config
        self.seen = Seen()

    def fork(self) -> Toolbox:
        """A toolbox for one of several calls run at once: what it shows is kept apart until `take`
        merges it, in the order the calls were asked (an answer citing nothing is based on everything
        shown, in that order, whichever call ended first)."""
        twin = copy.copy(self)
        twin.seen = Seen()
        return twin

    def take(self, fork: Toolbox) -> None:
        self.seen.memories.update(fork.seen.memories)
        self.seen.mental_models.update(fork.seen.mental_models)

    async def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"_tool_{name}", None)
        if handler is None or name == "done":
            return {"error": f"unknown tool {name!r}"}
        try:
            return await handler(**arguments)
        except TypeError as exc:
            return {"error": f"bad arguments for {name}: {exc}"}

    def _recall_request(self, query: str, types: list[str], max_tokens: int) -> RecallRequest:
        return RecallRequest(
            query=query, types=types, budget=self.request.budget, max_tokens=max_tokens,
            tags=self.request.tags, tags_match=self.request.tags_match, tag_groups=self.request.tag_groups,
            include={"entities": None},
        )

    async def _tool_search_mental_models(self, query: str) -> dict[str, Any]:
        if self.request.exclude_mental_models:
            return {"mental_models": [], "note": "mental models are excluded from this request"}
        from engram.models.embedder import embed_query
        from engram.store.reflect_state import search_mental_models

        vector = await asyncio.to_thread(embed_query, query)
        rows = await search_mental_models(
            self.services.pool, self.bank_id, vector, tags=self.request.tags, tags_match=self.request.tags_match,
            exclude=self.request.exclude_mental_model_ids or [], limit=MENTAL_MODELS_PER_SEARCH,
        )
        found = []
        for row in rows:
            model = {"id": row["id"], "name": row["name"], "content": row["content"], "is_stale": row["is_stale"]}
            self.seen.mental_models[row["id"]] = model
            found.append(model)
        return {"mental_models": found}

    async def _tool_read_mental_models(self, ids: list[str]) -> dict[str, Any]:
        from engram.store.reflect_state import get_mental_model

        out = []
        for model_id in ids:
            row = await get_mental_model(self.services.pool, self.bank_id, str(model_id))
            if row is None or row["content"] is None or model_id in (self.request.exclude_mental_model_ids or []):
                continue
            model = {"id": row["id"], "name": row["name"], "content": row["content"], "is_stale": row["is_stale"]}
            self.seen.mental_models[row["id"]] = model
            out.append(model)
        return {"mental_models": out}

    async def _tool_search_observations(self, query: str) -> dict[str, Any]:
        from engram.consolidate.freshness import observation_freshness

        if self.request.fact_types and "observation" not in self.request.fact_types:
            return {"observations": [], "note": "observations are excluded from this request"}
        limit = self.request.reflect_search_observations_max_tokens or RECALL_MAX_TOKENS
        results = await self._recall(query, ["observation"], limit)
        state, pending = await observation_freshness(
            self.services.pool, self.bank_id, self.request.tags, self.request.tags_match
        )
        return {"observations": results, "freshness": state, "facts_not_yet_consolidated": pending}

    async def _tool_recall(self, query: str, types: list[str] | None = None) -> dict[str, Any]:
        allowed = [t for t in (self.request.fact_types or ["world", "experience"]) if t != "observation"] or ["world"]
        wanted = [t for t in (types or allowed) if t in allowed] or allowed
        return {"memories": await self._recall(query, wanted, RECALL_MAX_TOKENS)}

    async def _recall(self, query: str, types: list[str], max_tokens: int) -> list[dict[str, Any]]:
        from engram.recall.pipeline import recall

        response = await recall(self.services, self.bank_id, self._recall_request(query, types, max_tokens))
        shown = []
        for result in response.results:
            item = {"id": result.id, "type": result.type, "text": result.text,
                    "date": result.occurred_start or result.mentioned_at}
            if result.source_fact_ids:
                item["source_fact_ids"] = result.source_fact_ids
            self.seen.memories[result.id] = result.model_dump(exclude_none=True)
            shown.append(item)
        return shown

    async def _tool_expand(self, memory_id: str) -> dict[str, Any]:
        try:
            unit_id = uuid.UUID(str(memory_id))
        except ValueError:
            return {"error": f"not a memory id: {memory_id}"}
        row = await self.services.pool.fetchrow(
            """
            SELECT m.text, c.chunk_text, d.id AS document_id, left(d.original_text, 4000) AS document_text
            FROM memory_units m LEFT JOIN chunks c ON c.id = m.chunk_id
            LEFT JOIN documents d ON d.bank_id = m.bank_id AND d.id = m.document_id
            WHERE m.bank_id = $1 AND m.id = $2
            """,
            self.bank_id, unit_id,
        )
        if row is None:
            return {"error": f"no memory {memory_id} in this bank"}
        return {"memory": row["text"], "chunk": row["chunk_text"], "document_id": row["document_id"],
                "document_excerpt": row["document_text"]}
