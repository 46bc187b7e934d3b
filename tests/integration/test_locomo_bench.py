"""The LoCoMo retrieval benchmark runs end to end on one conversation: a smoke run of the pipeline
(ingest, recall, turn provenance, baselines, table, JSON). The figures are printed, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "locomo_recall.py"
DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"


@pytest.mark.skipif(not DATA.is_file(), reason=f"LoCoMo data not present at {DATA}")
def test_benchmark_runs_on_one_conversation(tmp_path: Path) -> None:
    figures = tmp_path / "locomo.json"
    # 40 questions keep the run short; the pipeline is the same for every question.
    done = subprocess.run(
        [sys.executable, str(BENCH), "--conversations", "1", "--questions", "40", "--json", str(figures)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LoCoMo evidence recall" in done.stdout
    assert "reproduce: .venv/bin/python bench/locomo_recall.py --conversations 1" in done.stdout

    report = json.loads(figures.read_text())
    for table in (report, report["baselines"]["bm25"], report["baselines"]["dense"]):
        for k in (5, 10, 50):
            recall = table[f"recall_at_{k}"]
            assert "overall" in recall
            assert set(recall) - {"overall"} <= {"1", "2", "3", "4"}
            assert all(0.0 <= value <= 1.0 for value in recall.values())
    assert report["questions"]["overall"] == 40
    assert report["ingest"]["turns"] > 0
    assert report["provenance"]["unmapped"] == 0


def test_benchmark_skips_when_the_data_is_absent(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--data", str(tmp_path / "missing.json"), "--json", str(tmp_path / "out.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("skipped:")
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(not DATA.is_file(), reason=f"LoCoMo data not present at {DATA}")
def test_ablation_replays_recall_exactly_and_reports_every_variant(tmp_path: Path) -> None:
    figures = tmp_path / "ablation.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "locomo_ablation.py"), "--conversations", "1", "--questions", "20",
         "--json", str(figures)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(figures.read_text())
    # the replay of Engram's fusion over the captured rankings is what recall returned, so the
    # variants differ from recall only by the part they take out
    assert report["everything (replayed)"] == report["recall as it ran"]
    assert {"without lead-ins", "ts_rank_cd instead of BM25", "one vector per fact", "without the graph arm",
            "without the temporal arm", "excluded words searched", "fixed keyword weight",
            "RRF instead of score fusion"} <= set(report)
