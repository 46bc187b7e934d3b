"""Recall remembers how many facts a scope holds for a few seconds (recall/scope_size.py); a retain
through this server makes it count again, so BM25's N is never behind this server's own writes."""

from __future__ import annotations

import httpx


def retain(http: httpx.Client, bank_id: str, texts: list[str]) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": t} for t in texts]})
    assert response.status_code == 200, response.text


def zebra_keyword_scores(http: httpx.Client, bank_id: str) -> list[float | None]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "zebra"})
    assert response.status_code == 200, response.text
    return [r["scores"].get("keyword") for r in response.json()["results"] if "zebra" in r["text"].lower()]


def test_a_retain_refreshes_the_scope_size_behind_bm25(http: httpx.Client, bank_id: str) -> None:
    # In 2 facts of 2, "zebra" is ubiquitous (in over half of the facts): it scores nothing, so the
    # keyword arm has no candidate (the facts are found by meaning alone).
    retain(http, bank_id, ["Ada photographed a zebra at the waterhole.", "Ben painted a zebra on the wall."])
    assert zebra_keyword_scores(http, bank_id) == [None, None]
    # Three more facts without it: 2 of 5 is no longer over half, so the word counts — at once, with N
    # counted again, not the remembered 2.
    retain(http, bank_id, ["Cleo baked bread on Sunday.", "Dev repaired the old bicycle.", "Eli planted tulips."])
    scores = zebra_keyword_scores(http, bank_id)
    assert len(scores) == 2 and all(score is not None and score > 0 for score in scores), scores
