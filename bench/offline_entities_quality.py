"""Precision and recall of the offline (rule-based) entity extractor on tests/data/chat_entities.tsv:
200 chat turns written for it and labelled by hand. Prints the figures and every wrong answer.

    .venv/bin/python bench/offline_entities_quality.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.entity_sample import load_sample, score  # noqa: E402


def main() -> None:
    sample = load_sample()
    result = score(sample)
    print(f"{len(sample)} turns, {result.expected} labelled entities, {result.found} extracted")
    print(f"precision {result.precision:.1%}  recall {result.recall:.1%}")
    for text, wrong, missed in result.mistakes:
        print(f"  {text!r}: extra {wrong} missed {missed}")
    print("command: .venv/bin/python bench/offline_entities_quality.py")


if __name__ == "__main__":
    main()
