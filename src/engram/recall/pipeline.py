"""Recall: a query in, the most relevant memories out, within a token budget.

The arms run concurrently on their own connections (graph waits for the semantic seeds), their
rankings are fused (a weighted sum of each arm's scaled scores), optionally reranked, boosted, and cut
to `max_tokens`."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.errors import BankNotFound, InvalidInput
from engram.give_way import waited_on
from engram.recall import arms, keyword_arm
from engram.recall.budget import fill_budget
from engram.recall.documents import share_document_best
from engram.recall.exclusion import keyword_text
from engram.recall.filters import UnitFilter
from engram.recall.include import include_chunks, include_entities, include_source_facts
from engram.recall.kinds import kind_factor
from engram.recall.neighbours import NEIGHBOUR_SOURCES, share_with_neighbours
from engram.recall.rows import fetch_candidates, result_payload
from engram.recall.scope_size import facts_in_scope
from engram.recall.scoring import best_first, fuse_scores, leading, proof_factor, recency_factor, temporal_factor
from engram.recall.speakers import speaker_factor
from engram.store.instants import OutOfCalendar, clamp, in_utc
from engram.store.spare import spare_connection, together
from engram.types import RecallRequest, RecallResponse

if TYPE_CHECKING:
    import asyncpg

    from engram.services import Services

ALL_TYPES = ["world", "experience", "observation"]


def _window(request: RecallRequest, now: datetime, enabled: bool) -> tuple[datetime, datetime] | None:
    if not enabled:
        return None
    if request.temporal_window is not None:
        start, end = request.temporal_window.start, request.temporal_window.end
        return (clamp(start), clamp(end))
    from engram.models.dates import parse_query_time

    found = parse_query_time(request.query, now)
    return (found.start, found.end) if found else None


def _query_time(value: datetime) -> datetime:
    try:
        return in_utc(value)
    except OutOfCalendar as exc:
        raise InvalidInput("query_timestamp", str(exc)) from None


async def _timed(name: str, timings: dict[str, float], coro: Any) -> Any:
    started = time.perf_counter()
    try:
        return await coro
    finally:
        timings[name] = round((time.perf_counter() - started) * 1000, 2)


async def run_arms(
    services: Services, scope: UnitFilter, request: RecallRequest, query_vector: Any, limit: int,
    window: tuple[datetime, datetime] | None, config: dict[str, Any], timings: dict[str, float],
) -> dict[str, arms.Ranked]:
    """Every arm's ranking. `query_vector`: the query's embedding, or a task making it: the keyword arm
    needs none, so it runs while the query is embedded."""
    pool = services.pool

    async def vector() -> Any:
        return await query_vector if isinstance(query_vector, asyncio.Future) else query_vector

    min_scores = request.min_scores
    min_semantic = min_scores.semantic if min_scores else None  # None: relative to the best hit
    min_keyword = min_scores.keyword if min_scores else None

    async def with_conn(fn: Any, *args: Any) -> arms.Ranked:
        async with pool.acquire() as conn:
            return await fn(conn, scope, *args)

    size = await facts_in_scope(pool, scope)

    async def semantic_then_graph() -> tuple[arms.Ranked, arms.Ranked]:
        async with pool.acquire() as conn:  # the graph's first half runs here: it waits for the seeds anyway
            query = await vector()
            # The semantic and the graph arm each run in two parts on two connections when the pool
            # has one to spare: the recall waits for them with little else running (the keyword and
            # temporal arms mostly end while the query is embedded), so the second core would
            # otherwise idle. The spare is taken once the query is embedded and held through both.
            other = await spare_connection(pool)
            try:
                semantic = await _timed("semantic", timings,
                                        arms.semantic(conn, scope, query, limit, min_semantic, size, spare=other))
                if not config.get("enable_graph_retrieval", True):
                    return semantic, []
                graph = await _timed("graph", timings, _graph_in_halves(conn, other, scope, semantic, limit))
            finally:
                if other is not None:
                    await pool.release(other)
        return semantic, graph

    tasks: dict[str, Any] = {"semantic+graph": semantic_then_graph()}
    if config.get("enable_text_search", True):
        words = keyword_text(request.query)
        tasks["keyword"] = _timed("keyword", timings, with_conn(keyword_arm.keyword, words, limit, min_keyword, size))
    if window is not None:
        async def temporal() -> arms.Ranked:
            query = await vector()
            return await _timed("temporal", timings, with_conn(arms.temporal, query, window[0], window[1], limit))

        tasks["temporal"] = temporal()
    results = dict(zip(tasks, await asyncio.gather(*tasks.values()), strict=False))
    semantic, graph = results.pop("semantic+graph")
    ranked = {"semantic": semantic, **results}
    if graph:
        ranked["graph"] = graph
    return ranked


async def _graph_in_halves(
    conn: asyncpg.Connection, other: asyncpg.Connection | None, scope: UnitFilter, semantic: arms.Ranked,
    limit: int,
) -> arms.Ranked:
    """The graph arm, its seeds split in two halves spread on `conn` and `other` at once; with no
    other connection (none was idle, or none was handed over soon), the whole arm on `conn`."""
    seeds = arms.graph_seeds(semantic)
    if len(seeds) < 2 or other is None:
        return await arms.graph(conn, scope, semantic, limit)
    halves = seeds[0::2], seeds[1::2]  # alternating, so each half gets strong and weak seeds alike
    parts = await together(arms.graph(conn, scope, semantic, limit, spread_from=halves[0]),
                           arms.graph(other, scope, semantic, limit, spread_from=halves[1]))
    return arms.best_of_parts(list(parts), limit)


async def recall(services: Services, bank_id: str, request: RecallRequest) -> RecallResponse:
    """The recall as a RecallResponse model (the library, reflect's tools)."""
    return RecallResponse.model_validate(await recall_payload(services, bank_id, request))


Scored = tuple[float, uuid.UUID, dict[str, float]]  # final score, unit, the scores a result shows


async def recall_payload(services: Services, bank_id: str, request: RecallRequest) -> dict[str, Any]:
    """The recall as the JSON-ready data of a RecallResponse with no null fields (the API sends it as
    it is: see `result_payload`)."""
    started = time.perf_counter()
    from engram.models.embedder import embed_query

    timings: dict[str, float] = {}
    # Embedded on a worker thread while the bank's settings are read and the keyword arm runs.
    embedding = asyncio.ensure_future(_timed("embed", timings, asyncio.to_thread(embed_query, request.query)))
    try:
        with waited_on():  # bulk work gives way meanwhile (`engram.give_way`)
            return await _recall_payload(services, bank_id, request, embedding, timings, started)
    finally:
        if not embedding.done():
            embedding.cancel()
        elif not embedding.cancelled():
            embedding.exception()  # retrieved, so a failure that a 404 made moot is not logged as lost


async def _recall_payload(
    services: Services, bank_id: str, request: RecallRequest, embedding: asyncio.Future[Any],
    timings: dict[str, float], started: float,
) -> dict[str, Any]:
    config = await services.existing_bank_config(bank_id)
    if config is None:
        raise BankNotFound(bank_id)
    types = list(dict.fromkeys(request.types or ALL_TYPES))
    scope = UnitFilter(bank_id, types, request.tags, request.tags_match, request.tag_groups)
    limit = int(config.get(f"recall_budget_fixed_{request.budget}") or 300)
    now = _query_time(request.query_timestamp) if request.query_timestamp else datetime.now(UTC)
    window = _window(request, now, bool(config.get("enable_temporal_retrieval", True)))

    ranked = await run_arms(services, scope, request, embedding, limit, window, config, timings)
    query_vector = await embedding
    fused = fuse_scores(ranked)
    ranked_ids = best_first(fused)
    sources = leading(ranked_ids, fused, NEIGHBOUR_SOURCES)  # the candidates that share with their neighbours
    rows, neighbours = await _timed("fetch", timings, fetch_candidates(
        services.pool, scope, leading(ranked_ids, fused, limit), query_vector, neighbours_of=sources,
        with_entity_ids=request.include.entities is not None))
    fused = share_with_neighbours(fused, sources, neighbours)
    top_ids = leading(best_first(fused), fused, limit)
    fused = share_document_best(fused, top_ids, rows)

    reranked = await _rerank(services, config, request.query, top_ids, rows, timings)
    scored = _score(top_ids, rows, fused, reranked, dict(ranked.get("keyword", [])), now, window, request.query)
    floors = request.min_scores
    if floors and floors.reranker is not None and reranked:
        scored = [s for s in scored if s[2].get("reranker", 0.0) >= floors.reranker]
    if floors and floors.final is not None:
        scored = [s for s in scored if s[0] >= floors.final]

    prefer = request.prefer_observations
    if prefer is None:
        prefer = bool(config.get("recall_prefer_observations"))
    if prefer and "observation" in types and ({"world", "experience"} & set(types)):
        covered = {str(f) for _, uid, _ in scored if rows[uid]["fact_type"] == "observation"
                   for f in rows[uid]["source_memory_ids"]}
        scored = [s for s in scored if rows[s[1]]["fact_type"] == "observation" or str(s[1]) not in covered]
    kept, _ = fill_budget(
        scored, [rows[uid]["text"] for _, uid, _ in scored], request.max_tokens,
        [rows[uid]["token_count"] for _, uid, _ in scored],
    )
    results = [result_payload(rows[uid], scores) for _, uid, scores in kept]

    response: dict[str, Any] = {"results": results}
    include = request.include
    if include.entities is not None and results:
        response["entities"] = await _timed("include_entities", timings, include_entities(
            services.pool, [rows[uid] for _, uid, _ in kept], include.entities.max_tokens))
    if include.chunks is not None and results:
        chunks = await include_chunks(services.pool, results, include.chunks.max_tokens)
        response["chunks"] = {cid: c.model_dump(mode="json", exclude_none=True) for cid, c in chunks.items()}
    if include.source_facts is not None and results:
        response["source_facts"], response["source_facts_truncated"] = await include_source_facts(
            services.pool, results, include.source_facts
        )
    if request.trace:
        response["trace"] = _trace(request, ranked, fused, scored, timings, window, limit, started)
        if "observation" in types:
            from engram.consolidate.freshness import observation_freshness

            state, pending = await observation_freshness(services.pool, bank_id, request.tags, request.tags_match)
            response["trace"]["observations_freshness"] = {"state": state, "pending_facts": pending}
    return response


RERANK_MAX_CANDIDATES = 300


async def _rerank(
    services: Services, config: dict[str, Any], query: str, top_ids: list[uuid.UUID],
    rows: dict[uuid.UUID, Any], timings: dict[str, float],
) -> dict[uuid.UUID, float]:
    """Cross-encoder scores for the best ≤ 300 fused candidates, when a local model is configured."""
    path = services.settings.reranker_model_path
    if not path or not config.get("enable_reranking", True):
        return {}
    from engram.recall.rerank import cross_encoder

    ids = [uid for uid in top_ids if uid in rows][:RERANK_MAX_CANDIDATES]
    model = cross_encoder(path)
    scores = await _timed("rerank", timings, asyncio.to_thread(model.score, query, [rows[u]["text"] for u in ids]))
    return dict(zip(ids, (float(s) for s in scores)))


def _score(
    top_ids: list[uuid.UUID], rows: dict[uuid.UUID, Any], fused: dict[uuid.UUID, float],
    reranked: dict[uuid.UUID, float], keyword_scores: dict[uuid.UUID, float], now: datetime,
    window: tuple[datetime, datetime] | None, query: str = "",
) -> list[Scored]:
    """Final scores, best first: the reranker's score (or the fused rank, scaled to the best) times
    the recency, temporal-proximity, proof-count, speaker and asked-kind boosts (a fact said by a
    person `query` names, engram.recall.speakers; one naming a place when `query` asks where,
    engram.recall.kinds). Equal scores in `content_order`."""
    # Fused scores are spread over [0, 1] (RRF's were compressed: rank 1 = 1/61, rank 10 = 1/70), so the
    # ±10 % boosts only reorder near-ties instead of sorting everything by date.
    values = [fused[u] for u in top_ids if u in rows]
    low, high = min(values, default=0.0), max(values, default=1.0)
    span = high - low
    said_by_named, names_asked_kind = speaker_factor(query), kind_factor(query)
    time_boosts = _time_boosts(now, window)
    scored = []
    for unit_id in top_ids:
        row = rows.get(unit_id)
        if row is None or (reranked and unit_id not in reranked):
            continue
        spread = (fused[unit_id] - low) / span if span else 1.0
        base = reranked[unit_id] if reranked else 0.05 + 0.95 * spread
        recency, in_window = time_boosts(
            row["occurred_start"], row["mentioned_at"], row["created_at"], row["occurred_end"])
        final = (
            base
            * recency
            * in_window
            * proof_factor(row["fact_type"], row["proof_count"])
            * said_by_named(row["text"])
            * names_asked_kind(row["entity_types"])
        )
        scores = {"final": final}
        if reranked:
            scores["reranker"] = reranked[unit_id]
        scores["semantic"] = float(row["similarity"])
        if (keyword := keyword_scores.get(unit_id)) is not None:
            scores["keyword"] = keyword
        scored.append((final, unit_id, scores))
    return _in_final_order(scored, rows)


def _time_boosts(now: datetime, window: tuple[datetime, datetime] | None) -> Callable[..., tuple[float, float]]:
    """(occurred_start, mentioned_at, created_at, occurred_end) → (the recency boost, the temporal
    window's), remembered per distinct instants: the facts of one retain share theirs, and a recall
    boosts ~200 facts."""

    @functools.cache
    def boosts(start: datetime | None, said: datetime | None, created: datetime,
               end: datetime | None) -> tuple[float, float]:
        return recency_factor(start or said or created, now), temporal_factor(start or said, end, window)

    return boosts


def _in_final_order(scored: list[Scored], rows: dict[uuid.UUID, Any]) -> list[Scored]:
    """`scored` best first; equal scores ordered by what the facts hold, not by their ids: the same data
    gives the same ranking, even in another bank or after a fresh ingest, where every id differs. Only
    the runs of equal scores are ordered by content (rare: a key made for every fact cost more than
    the rest of the scoring)."""
    ordered: list[Scored] = []
    for _, run in itertools.groupby(sorted(scored, key=lambda s: -s[0]), key=lambda s: s[0]):
        tied = list(run)
        ordered += tied if len(tied) == 1 else sorted(tied, key=lambda s: (*content_order(rows[s[1]]), s[1]))
    return ordered


_UNDATED = datetime.min.replace(tzinfo=UTC)


def content_order(row: Any) -> tuple[str, tuple[bool, datetime], str]:
    """A fact's place among facts of equal score: its text, then (for the same words said twice, "Bye!")
    when it was said or happened, undated first, then its document. (The datetimes themselves, not
    their ISO strings: a key is made for every candidate, and formatting ~300 dates a recall showed.)"""
    when = row["occurred_start"] or row["mentioned_at"]
    return (row["text"], (when is not None, when or _UNDATED), row["document_id"] or "")


def _trace(
    request: RecallRequest, ranked: dict[str, arms.Ranked], fused: dict[uuid.UUID, float],
    scored: list[Scored], timings: dict[str, float],
    window: tuple[datetime, datetime] | None, limit: int, started: float,
) -> dict[str, Any]:
    positions = {name: {uid: rank for rank, (uid, _) in enumerate(lst, start=1)} for name, lst in ranked.items()}
    return {
        "query": request.query,
        "budget": request.budget,
        "candidates_per_arm": limit,
        "temporal_window": {"start": window[0].isoformat(), "end": window[1].isoformat()} if window else None,
        "arms": {name: {"count": len(lst), "ms": timings.get(name)} for name, lst in ranked.items()},
        "embed_ms": timings.get("embed"),
        "rerank_ms": timings.get("rerank"),
        "fetch_ms": timings.get("fetch"),
        "include_entities_ms": timings.get("include_entities"),
        "total_ms": round((time.perf_counter() - started) * 1000, 2),
        "results": [
            {
                "id": str(uid),
                "ranks": {name: pos[uid] for name, pos in positions.items() if uid in pos},
                "fused": round(fused[uid], 6),
                "final": round(final, 6),
            }
            for final, uid, _ in scored[:100]
        ],
    }
