"""Reranking with a local cross-encoder: when ENGRAM_RERANKER_MODEL_PATH names one, its scores order
the results and show in `scores.reranker`; `min_scores.reranker` drops what it scores low."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import start_server
from tests.support.tiny_cross_encoder import build


def test_a_configured_cross_encoder_orders_the_results(isolated_dsn: str, tmp_path: Path, bank_id: str) -> None:
    model = build(tmp_path / "reranker", favourite_word="tomato")
    server = start_server(isolated_dsn, {"ENGRAM_RERANKER_MODEL_PATH": str(model)}, name="rerank")
    try:
        with server.client() as client:
            client.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": (
                "Our garden grows lettuce and peppers. "
                "The kitchen garden has one tomato plant by the fence. "
                "Garden vegetables need water every morning.")}]}).raise_for_status()
            body = client.post(f"/v1/default/banks/{bank_id}/memories/recall",
                               json={"query": "garden vegetables", "trace": True}).json()
            assert "tomato" in body["results"][0]["text"]
            assert body["results"][0]["scores"]["reranker"] > 0.5 > body["results"][1]["scores"]["reranker"]
            assert body["trace"]["rerank_ms"] is not None

            floored = client.post(f"/v1/default/banks/{bank_id}/memories/recall",
                                  json={"query": "garden vegetables", "min_scores": {"reranker": 0.5}}).json()
            assert [r["text"] for r in floored["results"]] == [body["results"][0]["text"]]
    finally:
        server.stop()
