"""The hand-labelled chat sample for the offline entity extractor (tests/data/chat_entities.tsv) and
its precision / recall, shared by the quality test and bench/offline_entities_quality.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engram.retain.offline_entities import extract_entities

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "chat_entities.tsv"


def load_sample() -> list[tuple[str, set[str]]]:
    turns = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        text, _, labels = line.partition("\t")
        turns.append((text, {label for label in labels.split(";") if label}))
    return turns


@dataclass
class Score:
    expected: int = 0
    found: int = 0
    correct: int = 0
    mistakes: list[tuple[str, list[str], list[str]]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.correct / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected if self.expected else 1.0


def score(sample: list[tuple[str, set[str]]]) -> Score:
    """Exact-name matching, case-blind; each turn alone, with no speaker (the speaker rule is another test's)."""
    result = Score()
    for text, labels in sample:
        got = {name.casefold(): name for name in extract_entities(text)}
        want = {label.casefold(): label for label in labels}
        result.expected += len(want)
        result.found += len(got)
        result.correct += len(got.keys() & want.keys())
        wrong = sorted(got[k] for k in got.keys() - want.keys())
        missed = sorted(want[k] for k in want.keys() - got.keys())
        if wrong or missed:
            result.mistakes.append((text, wrong, missed))
    return result
