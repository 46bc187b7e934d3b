"""Beliefs are refined, never dropped for a change of state: a delete the LLM proposes without naming
the observation that now covers it (`merged_into`) is not applied as a delete.

When the same answer creates observations, the create closest in meaning to the doomed observation
becomes a rewrite of it instead: the new wording replaces the old one, which goes into history, and
the observation keeps every source it had plus the new ones. Without a create, the observation simply
stays. Only redundancy (a delete `merged_into` another observation) or losing every source removes one."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from engram.consolidate.plan import Plan, PlannedWrite, merge_evidence


def _cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denominator if denominator else 0.0


def refine_instead_of_deleting(plan: Plan, observations: dict[str, Any], stats: Counter[str]) -> None:
    """Turn the plan's plain deletes into rewrites (needs the creates' vectors) or drop them."""
    by_id = {row["id"]: row for row in observations.values()}
    for observation_id in [oid for oid, into in plan.deletes.items() if into is None]:
        del plan.deletes[observation_id]
        creates = [w for w in plan.writes if w.observation_id is None]
        if not creates:
            stats["deletes_refused"] += 1
            continue
        row = by_id[observation_id]
        chosen: PlannedWrite = max(creates, key=lambda w: _cosine(w.vector, row["embedding"]))
        chosen.observation_id = observation_id
        chosen.sources = list(dict.fromkeys([*row["source_memory_ids"], *chosen.sources]))
        chosen.evidence = merge_evidence(list(row["evidence"] or []), chosen.evidence)
        chosen.reason = "refined instead of deleted: the new evidence changes this belief"
        stats["deletes_refined"] += 1
