"""The bank settings schema: the README's table is generated from it, the environment is checked
against it, and the chunker terminates whatever size it is given."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engram.bank_schema import BANK_SETTINGS, settings_table
from engram.retain.chunking import MIN_CHUNK_CHARS, chunk_text
from engram.settings import env_bank_defaults

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_bank_setting_as_the_schema_says() -> None:
    table = settings_table()
    assert table in README.read_text(), (
        "README.md's bank settings table is out of date; replace it with:\n\n" + table)


def test_every_default_is_within_its_own_range() -> None:
    for setting in BANK_SETTINGS.values():
        assert setting.problem(setting.default) is None, setting.name


def test_environment_values_outside_the_range_keep_the_default() -> None:
    resolved = env_bank_defaults({
        "ENGRAM_RETAIN_CHUNK_SIZE": "0", "HINDSIGHT_API_DISPOSITION_EMPATHY": "6",
        "ENGRAM_CONSOLIDATION_DEDUP_THRESHOLD": "nan", "ENGRAM_RECALL_BUDGET_FIXED_LOW": "40",
        "ENGRAM_RETAIN_EXTRACTION_MODE": "verbose", "ENGRAM_RECALL_BUDGET_FUNCTION": "linear",
    })
    assert resolved["retain_chunk_size"] == 3000
    assert resolved["disposition_empathy"] == 3
    assert resolved["consolidation_dedup_threshold"] == 0.97
    assert resolved["recall_budget_function"] == "fixed"
    assert resolved["recall_budget_fixed_low"] == 40
    assert resolved["retain_extraction_mode"] == "verbose"


@pytest.mark.parametrize("size", [-1, 0, 1, 7, MIN_CHUNK_CHARS, 2**70])
def test_chunking_terminates_for_any_size(size: int) -> None:
    words = ["Harbour", "gates", "open", "at", "dawn.", "x" * 400, "Ships", "leave", "at", "noon."] * 30
    text = " ".join(words)
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append(chunk_text(text, size)), daemon=True)
    worker.start()
    worker.join(timeout=5)  # a size the chunker cannot handle used to loop forever
    assert result, f"chunk_text(…, {size}) did not finish"
    chunks = result[0]
    assert "".join(chunks).replace(" ", "") == text.replace(" ", ""), "nothing lost or repeated"
    effective = max(size, MIN_CHUNK_CHARS)
    assert all(len(chunk) <= effective for chunk in chunks)
