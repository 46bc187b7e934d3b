"""What each part of offline recall earns on LoCoMo: R@5/@10/@50 of Engram's recall with one part taken
out at a time.

One in-process run (engram.Memory on a throw-away embedded PostgreSQL, no LLM) ingests the
conversations as `locomo_recall.py` does and asks every question once. For each question it keeps
every arm's ranking, and the rankings Engram would get without a part:

- the keyword arm without lead-ins (a lead-in word weighs 0 instead of 0.5),
- the keyword arm without the facts' dates (a date word weighs 0 instead of 0.5),
- the keyword arm ranked by PostgreSQL's `ts_rank_cd` instead of BM25 (same index, lead-ins included),
- the semantic arm with each fact's own vector only (no sentence vectors; the graph arm keeps the
  seeds it had),
- the keyword arm searching the whole question, the excluded thing of "besides X" included.

Then Engram's own fusion and final scoring (`engram.recall.scoring`, `engram.recall.pipeline._score`)
are replayed over those rankings, once with everything and once per variant (two variants change the
fusion instead: a fixed keyword weight, and reciprocal rank fusion as before; one leaves out the
share of a fused score each conversation neighbour gets, one the share of its document's best score
each candidate gets, one the speaker's boost, one the asked kind's, one the reply's larger share,
one sets all three shares to their values before the speaker's boost; an arm alone is replayed with
neighbours' shares, without the document's share and the two boosts); the first line also shows what
recall itself returned, which the full replay must match. Prints a table and the command that
reproduces it; asserts nothing.

    .venv/bin/python bench/locomo_ablation.py                                  # the dev split, ~5 minutes
    .venv/bin/python bench/locomo_ablation.py --conversations 1 --questions 20  # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from locomo_recall import CATEGORIES, DEFAULT_DATA, KS, TurnIndex, evidence_recall, load, retain_items

from engram.recall.arms import Ranked

FULL = {"semantic": "semantic", "keyword": "keyword", "graph": "graph", "temporal": "temporal"}
# (name, {arm: captured ranking}, fusion: "scores" = Engram's, "fixed" = the same with the keyword weight
# not adapted to the query, "rrf" = reciprocal rank fusion with k = 60; all but "no neighbours" then
# share scores with conversation neighbours as recall does)
VARIANTS = [
    ("everything (replayed)", FULL, "scores"),
    ("without lead-ins", {**FULL, "keyword": "keyword_without_lead_in"}, "scores"),
    ("without the facts' dates", {**FULL, "keyword": "keyword_without_dates"}, "scores"),
    ("ts_rank_cd instead of BM25", {**FULL, "keyword": "keyword_ts_rank_cd"}, "scores"),
    ("one vector per fact", {**FULL, "semantic": "semantic_own_vector"}, "scores"),
    ("without the temporal arm", {k: v for k, v in FULL.items() if k != "temporal"}, "scores"),
    ("without the graph arm", {k: v for k, v in FULL.items() if k != "graph"}, "scores"),
    ("excluded words searched", {**FULL, "keyword": "keyword_with_excluded_words"}, "scores"),
    ("fixed keyword weight", FULL, "fixed"),
    ("RRF instead of score fusion", FULL, "rrf"),
    ("without neighbours' shares", FULL, "no neighbours"),
    ("without the document's share", FULL, "no document share"),
    ("without the speaker's boost", FULL, "no speaker boost"),
    ("without the asked kind's boost", FULL, "no kind boost"),
    ("replies shared like any neighbour", FULL, "no reply share"),
    ("shares as before (0.1, 0.1, 0.3)", FULL, "shares as before"),
]
# Each fact's conversation neighbours (engram.recall.neighbours), read once per bank after the ingest.
NEIGHBOURS: dict[uuid.UUID, list[tuple[uuid.UUID, bool]]] = {}
# Each fact's entities as (name, entity_type or None, mention count), read once per bank after the ingest.
ENTITIES: dict[uuid.UUID, list[tuple[str, str | None, int]]] = {}
ALONE = ["keyword", "keyword_without_lead_in", "keyword_ts_rank_cd", "semantic", "semantic_own_vector"]


@dataclass
class Capture:
    """One question: what recall returned, every arm's ranking, and what the final scoring reads."""

    category: int
    question: str
    evidence: tuple[str, ...]
    returned: list[str | None]
    rankings: dict[str, Ranked]
    window: tuple[datetime, datetime] | None
    now: datetime


async def variant_rankings(services: Any, scope: Any, query: str, query_vector: Any, limit: int) -> dict[str, Ranked]:
    from engram.recall import arms, keyword_arm
    from engram.recall.exclusion import keyword_text
    from engram.store.sql import SqlParams

    words = keyword_text(query)  # what recall's keyword arm searches
    found: dict[str, Ranked] = {}
    async with services.pool.acquire() as conn:
        for name, setting in (("keyword_without_lead_in", "LEAD_IN_WEIGHT"), ("keyword_without_dates", "DATE_WEIGHT")):
            weight = getattr(keyword_arm, setting)
            setattr(keyword_arm, setting, 0.0)
            try:
                found[name] = await keyword_arm.keyword(conn, scope, words, limit, None)
            finally:
                setattr(keyword_arm, setting, weight)
        found["keyword_with_excluded_words"] = await keyword_arm.keyword(conn, scope, query, limit, None)
        terms = keyword_arm.keyword_query(words)
        params = SqlParams()
        tsquery, where = params.add(terms or "x"), scope.where(params)
        rows = await conn.fetch(
            f"SELECT m.id, ts_rank_cd(m.search, q) AS score FROM memory_units m, to_tsquery('english', {tsquery}) q"
            f" WHERE {where} AND m.search @@ q ORDER BY score DESC LIMIT {params.add(limit)}", *params.values)
        found["keyword_ts_rank_cd"] = [(r["id"], float(r["score"])) for r in rows] if terms else []
        params = SqlParams()
        vector, where = params.add(query_vector), scope.where(params)
        rows = await conn.fetch(
            f"SELECT m.id, 1 - (m.embedding <=> {vector}::vector) AS score FROM memory_units m WHERE {where}"
            f" ORDER BY m.embedding <=> {vector}::vector LIMIT {params.add(limit)}", *params.values)
        found["semantic_own_vector"] = [(r["id"], float(r["score"])) for r in rows
                                        if r["score"] >= arms.SEMANTIC_MIN_SIMILARITY]
    return found


def capture(args: argparse.Namespace) -> tuple[list[Capture], dict[uuid.UUID, Any], dict[uuid.UUID, str | None]]:
    """Ingest, ask every question, and keep the rankings (recall's arms are wrapped, not changed)."""
    import engram
    from engram.recall import pipeline
    from engram.recall.filters import UnitFilter
    from engram.recall.neighbours import fetch_neighbours
    from engram.recall.pipeline import ALL_TYPES

    conversations, _ = load(args.data, args.conversations, args.questions, True)
    seen: dict[str, tuple[dict[str, Ranked], Any]] = {}
    run_arms = pipeline.run_arms

    async def recording_run_arms(services: Any, scope: Any, request: Any, query_vector: Any, limit: int,
                                 window: Any, config: Any, timings: Any) -> dict[str, Ranked]:
        ranked = await run_arms(services, scope, request, query_vector, limit, window, config, timings)
        if isinstance(query_vector, asyncio.Future):  # recall hands over the task embedding the query
            query_vector = await query_vector
        extra = await variant_rankings(services, scope, request.query, query_vector, limit)
        seen[request.query] = ({**ranked, **extra}, window)
        return ranked

    pipeline.run_arms = recording_run_arms
    captures: list[Capture] = []
    rows: dict[uuid.UUID, Any] = {}
    turn_of: dict[uuid.UUID, str | None] = {}
    workdir = Path(tempfile.mkdtemp(prefix="engram-ablation-"))
    memory = engram.Memory(workdir)
    try:
        services = memory._run(memory._open())
        for conversation in conversations:
            memory.retain_batch(conversation.bank, retain_items(conversation))
            units = memory._run(services.pool.fetch(
                "SELECT id, text, document_id, fact_type, proof_count, occurred_start, occurred_end, mentioned_at,"
                " created_at, lead_in, embedding, 0.0 AS similarity, ARRAY(SELECT DISTINCT e.entity_type"
                " FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id WHERE ue.unit_id = memory_units.id"
                " AND e.entity_type IS NOT NULL) AS entity_types FROM memory_units WHERE bank_id = $1",
                conversation.bank))
            NEIGHBOURS.update(memory._run(fetch_neighbours(
                services.pool, UnitFilter(conversation.bank, ALL_TYPES), [unit["id"] for unit in units])))
            for row in memory._run(services.pool.fetch(
                    "SELECT ue.unit_id, e.canonical_name, e.entity_type, e.mention_count FROM unit_entities ue"
                    " JOIN entities e ON e.id = ue.entity_id WHERE e.bank_id = $1"
                    " ORDER BY ue.unit_id, e.canonical_name", conversation.bank)):
                ENTITIES.setdefault(row["unit_id"], []).append(
                    (row["canonical_name"], row["entity_type"], row["mention_count"]))
            index = TurnIndex(conversation)
            for unit in units:
                rows[unit["id"]] = dict(unit)
                turn_of[unit["id"]] = index.turn_of({"id": str(unit["id"]), "text": unit["text"],
                                                     "document_id": unit["document_id"]})
            asked_at = conversation.sessions[-1].said_at
            for question in conversation.questions:
                response = memory.recall(conversation.bank, question.text, budget="mid", max_tokens=8192,
                                         query_timestamp=asked_at)
                rankings, window = seen.pop(question.text)
                returned = [turn_of.get(uuid.UUID(str(result.id))) for result in response.results]
                captures.append(Capture(question.category, question.text, question.evidence, returned, rankings,
                                        window, asked_at))
            print(f"{conversation.sample_id}: {len(conversation.questions)} questions captured", flush=True)
    finally:
        pipeline.run_arms = run_arms
        memory.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return captures, rows, turn_of


# Constants a variant sets for its replay: (module, name, value).
PATCHES = {
    "no speaker boost": [("speakers", "SPEAKER_BOOST", 0.0)],
    "no kind boost": [("kinds", "KIND_BOOST", 0.0)],
    "no reply share": [("neighbours", "REPLY_SHARE", None)],  # None: the other neighbours' share
    "shares as before": [("neighbours", "REPLY_SHARE", 0.1), ("neighbours", "NEIGHBOUR_SHARE", 0.1),
                         ("documents", "DOCUMENT_SHARE", 0.3)],
    "alone": [("speakers", "SPEAKER_BOOST", 0.0), ("kinds", "KIND_BOOST", 0.0)],
}


@contextlib.contextmanager
def patched(fusion: str) -> Iterator[None]:
    from engram.recall import documents, kinds, neighbours, speakers

    modules = {"documents": documents, "kinds": kinds, "neighbours": neighbours, "speakers": speakers}
    saved = [(modules[module], name, getattr(modules[module], name)) for module, name, _ in PATCHES.get(fusion, [])]
    try:
        for module, name, value in PATCHES.get(fusion, []):
            setattr(modules[module], name, neighbours.NEIGHBOUR_SHARE if value is None else value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def replay(item: Capture, arms: dict[str, str], fusion: str, rows: dict[uuid.UUID, Any]) -> list[uuid.UUID]:
    """Engram's fusion (or a variant of it) and final scoring over the chosen rankings, best first."""
    from engram.recall import scoring
    from engram.recall.documents import share_document_best
    from engram.recall.neighbours import NEIGHBOUR_SOURCES, share_with_neighbours
    from engram.recall.pipeline import _score

    ranked = {arm: item.rankings.get(source, []) for arm, source in arms.items()}
    with patched(fusion):
        if fusion == "rrf":
            fused = scoring.fuse_rrf(ranked)
        elif fusion == "fixed":
            adapted = scoring.KEYWORD_WEIGHT_RANGE
            scoring.KEYWORD_WEIGHT_RANGE = (1.0, 1.0)
            try:
                fused = scoring.fuse_scores(ranked)
            finally:
                scoring.KEYWORD_WEIGHT_RANGE = adapted
        else:
            fused = scoring.fuse_scores(ranked)
        if fusion != "no neighbours":
            fused = share_with_neighbours(
                fused, scoring.leading(scoring.best_first(fused), fused, NEIGHBOUR_SOURCES), NEIGHBOURS)
        top = scoring.leading(scoring.best_first(fused), fused, 300)
        if fusion not in ("no document share", "alone"):
            fused = share_document_best(fused, top, rows)
        return [unit for _, unit, _ in _score(top, rows, fused, {}, {}, item.now, item.window, item.question)]


def figures(recalls: list[dict[int, float]], categories: list[int]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for k in KS:
        out[f"recall_at_{k}"] = {"overall": round(float(np.mean([r[k] for r in recalls])), 4)}
        for category in CATEGORIES:
            chosen = [r[k] for r, c in zip(recalls, categories, strict=True) if c == category]
            if chosen:
                out[f"recall_at_{k}"][str(category)] = round(float(np.mean(chosen)), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file (default: %(default)s)")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--questions", type=int, help="at most N questions per conversation")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--save", type=Path, help="also pickle the captured rankings and facts to this file")
    args = parser.parse_args(argv)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/locomo_ablation.py", *sys.argv[1:]])
    if not args.data.is_file():
        print(f"skipped: no LoCoMo data at {args.data} (pass --data PATH)")
        return 0
    captures, rows, turn_of = capture(args)
    if args.save:
        import pickle

        args.save.write_bytes(pickle.dumps((captures, rows, turn_of, NEIGHBOURS, ENTITIES)))
    categories = [c.category for c in captures]
    results: dict[str, dict[str, dict[str, float]]] = {
        "recall as it ran": figures([evidence_recall(c.evidence, c.returned) for c in captures], categories)}
    for name, arms, fusion in VARIANTS:
        ranked = [[turn_of[u] for u in replay(c, arms, fusion, rows)] for c in captures]
        results[name] = figures([evidence_recall(c.evidence, r) for c, r in zip(captures, ranked, strict=True)],
                                categories)
    for source in ALONE:
        ranked = [[turn_of[u] for u in replay(c, {"semantic": source}, "alone", rows)] for c in captures]
        results[f"{source} arm alone"] = figures(
            [evidence_recall(c.evidence, r) for c, r in zip(captures, ranked, strict=True)], categories)

    print(f"\nLoCoMo evidence recall by variant — {len(captures)} questions (categories 1-4)")
    print(f"{'':34} {'R@5':>6} {'R@10':>6} {'R@50':>6}   R@10 by category " + " / ".join(
        str(c) for c in CATEGORIES))
    for name, table in results.items():
        by_category = " / ".join(f"{table['recall_at_10'].get(str(c), float('nan')) * 100:.1f}" for c in CATEGORIES)
        print(f"{name:34} " + " ".join(f"{table[f'recall_at_{k}']['overall'] * 100:5.1f}%" for k in KS)
              + f"   {by_category}")
    print(f"\nreproduce: {command}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
