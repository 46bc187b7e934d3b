"""The speaker's boost in recall: a question that names a person ("What does Melanie do to destress?")
is answered by what that person said, not by the turns of the others that only address them ("Wow,
Melanie!"). The no-LLM retain path keeps a transcript turn's speaker at the head of its fact
("Melanie: I've been running farther to de-stress"), so a fact whose speaker the query names gets a
small multiplicative boost next to recency's and the temporal window's. On LoCoMo's dev split 95 % of
the evidence turns are spoken by a person the question names, but only 74 % of the top 10 were
(bench/locomo_ablation.py)."""

from __future__ import annotations

import re
from collections.abc import Callable

from engram.retain.sentences import turn_speaker

# Tuned on LoCoMo's dev split (bench/locomo_ablation.py): alone, 0.1 gave +0.4 R@10, 0.2 +0.7, 0.3
# +0.7; with the replies' share (engram.recall.neighbours) and the document's share at 0.4, 0.2 gave
# R@10 80.1 %, 0.3 80.4 %, 0.4 80.3 %.
SPEAKER_BOOST = 0.3


def _speaker(text: str) -> str | None:
    return turn_speaker(text.split("\n", 1)[0])


def speaker_factor(query: str) -> Callable[[str], float]:
    """For this query, a fact's text → 1 + SPEAKER_BOOST when the fact opens with a speaker the query
    names (a whole-word match, any case), else 1."""
    named: dict[str, bool] = {}

    def factor(text: str) -> float:
        speaker = _speaker(text)
        if speaker is None:
            return 1.0
        if speaker not in named:
            named[speaker] = re.search(rf"\b{re.escape(speaker)}\b", query, re.IGNORECASE) is not None
        return 1.0 + SPEAKER_BOOST if named[speaker] else 1.0

    return factor
