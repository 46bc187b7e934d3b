"""The document's share in recall: each candidate gets a share of the best score among the candidates
of its document (one retained item: a conversation's session, a note, a file). What a question asks
about is usually told over several turns of the same conversation, and the turn that matches the
question best vouches for the ones around it that do not repeat its words ("We roast marshmallows
around the campfire" in the session where the family camping trip is named). Spreading the results
over documents instead (MMR-style diversification) was measured to cost 2.5 to 19 points of R@10 on
LoCoMo's dev split; sharing the document's best score adds about 2 (bench/locomo_ablation.py).

Works on the rows recall already loaded for its candidates: no query of its own."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from engram.recall.scoring import leading

# Tuned on LoCoMo's dev split (bench/locomo_ablation.py; 0.3 before the speaker's boost and the replies'
# share, which made 0.4 worth +0.3 R@10). Only the best DOCUMENT_SOURCES candidates speak for their
# document: one weak match deep in the list says little about its document.
DOCUMENT_SHARE = 0.4
DOCUMENT_SOURCES = 100


def share_document_best(
    fused: dict[uuid.UUID, float], ranked: list[uuid.UUID], rows: Mapping[uuid.UUID, Any]
) -> dict[uuid.UUID, float]:
    """The fused scores of `ranked` (best first), each plus DOCUMENT_SHARE of the best fused score
    among the first DOCUMENT_SOURCES candidates (and those tied with the last of them) of its
    document. A fact with no document (an observation) is a document of its own, so it is not put
    behind the facts that have one."""

    def document(unit_id: uuid.UUID) -> str | uuid.UUID:
        row = rows.get(unit_id)
        return (row["document_id"] if row is not None else None) or unit_id

    best: dict[str | uuid.UUID, float] = {}
    for unit_id in leading(ranked, fused, DOCUMENT_SOURCES):
        key = document(unit_id)
        best[key] = max(best.get(key, fused[unit_id]), fused[unit_id])
    return {unit_id: fused[unit_id] + DOCUMENT_SHARE * best.get(document(unit_id), 0.0) for unit_id in ranked}
