"""The asked kind's boost in recall: a question that asks for places ("Which places has Tim been to?",
"Where did they meet?") is answered by facts naming a place, whatever words the question uses. A fact
naming an entity of the kind the question asks for gets a small multiplicative boost next to the
speaker's. Kinds are the entities' `entity_type` (the LLM's, the caller's, or the offline extractor's
guess, engram.retain.entity_kinds).

Only places are asked for: on LoCoMo's dev split the offline extractor gives a kind to 5 % of entity
mentions besides the speakers (49 places, 63 organisations); a boost for organisations ("Which
charities …") changed nothing there, one for places earned +0.1 R@10 and +0.3 R@5
(bench/locomo_ablation.py). Kinds an LLM names are denser: the boost is meant for those banks too."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

KIND_BOOST = 0.2
ASKED_KINDS = {
    "place": re.compile(r"\b(?:where|places|cities|countries|states|locations|destinations)\b", re.IGNORECASE),
}


def kind_factor(query: str) -> Callable[[Sequence[str] | None], float]:
    """For this query, a fact's entity types → 1 + KIND_BOOST when one of them is a kind the query
    asks for, else 1."""
    asked = {kind for kind, words in ASKED_KINDS.items() if words.search(query)}

    def factor(entity_types: Sequence[str] | None) -> float:
        return 1.0 + KIND_BOOST if asked and entity_types and asked.intersection(entity_types) else 1.0

    return factor
