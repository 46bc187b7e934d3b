"""The metrics registry's text: counters keep every digit a count or a CPU total needs."""

from __future__ import annotations

from engram.metrics import Registry


def test_a_counter_past_a_million_is_written_exactly() -> None:
    registry = Registry()
    registry.count("engram_embedder_texts_total", 1_234_567)
    registry.count("engram_embedder_cpu_seconds_total", 1234.5678)
    text = registry.render()
    assert "engram_embedder_texts_total 1234567\n" in text  # not 1.23457e+06: six digits lose the deltas
    assert "engram_embedder_cpu_seconds_total 1234.5678\n" in text
