"""Entity labels with no LLM: `value` and `multi-values` groups are classified by embedding
similarity between a fact and each allowed value (its name, plus its description when it has one).
A value needs similarity ≥ 0.25, and a single-value group's winner must lead the runner-up by 0.05,
so facts unrelated to the vocabulary get no label. `text` and `map` groups need an LLM; they are
skipped (and logged once per retain)."""

from __future__ import annotations

import logging

import numpy as np

from engram.retain.label_config import LabelGroup

log = logging.getLogger("engram.retain")

MIN_SIMILARITY = 0.25
MIN_LEAD = 0.05


def _value_text(value: str, description: str | None) -> str:
    return f"{value}: {description}" if description else value


def classify(groups: list[LabelGroup], fact_vectors: np.ndarray, embed) -> list[tuple[list[str], list[str]]]:  # noqa: ANN001
    """For each fact vector: (label entities, label tags). `embed` maps texts to unit vectors."""
    skipped = [g.key for g in groups if g.type not in ("value", "multi-values")]
    if skipped:
        log.info("entity labels %s need an LLM (text/map types); skipped with no LLM configured", skipped)
    enum_groups = [g for g in groups if g.type in ("value", "multi-values")]
    results: list[tuple[list[str], list[str]]] = [([], []) for _ in range(len(fact_vectors))]
    for group in enum_groups:
        vectors = embed([_value_text(v.value, v.description) for v in group.values])
        similarity = fact_vectors @ vectors.T
        for row, scores in enumerate(similarity):
            chosen = _choose(group, scores)
            labels, tags = results[row]
            labels.extend(f"{group.key}:{value}" for value in chosen)
            if group.tag:
                tags.extend(f"{group.key}:{value}" for value in chosen)
    return results


def _choose(group: LabelGroup, scores: np.ndarray) -> list[str]:
    order = np.argsort(-scores)
    if group.type == "multi-values":
        return [group.values[i].value for i in order if scores[i] >= MIN_SIMILARITY]
    best = order[0]
    runner_up = scores[order[1]] if len(order) > 1 else -1.0
    if scores[best] >= MIN_SIMILARITY and scores[best] - runner_up >= MIN_LEAD:
        return [group.values[best].value]
    return []
