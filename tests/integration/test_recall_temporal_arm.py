"""The temporal arm: a question naming a period finds the facts said in it and the events whose span
overlaps it (through the time-span index of migration 021), and nothing else."""

from __future__ import annotations

import httpx

SAID = [
    ("Maria: We spent the whole weekend helping out at the food bank.", "2023-05-14T10:00:00Z"),
    ("Maria: We spent the whole weekend helping out at the animal shelter.", "2023-08-20T10:00:00Z"),
    ("John: I finally fixed the leaking tap in the kitchen.", "2023-08-21T09:00:00Z"),
    ("John: The kids started their swimming lessons.", "2023-09-02T10:00:00Z"),
    ("Maria: Our garden party is planned for next spring.", "2022-12-30T10:00:00Z"),  # an event: March-May 2023
]


def temporal_ranking(http: httpx.Client, bank_id: str, query: str) -> list[str]:
    """The texts the temporal arm found, best first."""
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query, "trace": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["trace"]["temporal_window"] is not None, "the question names a period"
    texts = {r["id"]: r["text"] for r in body["results"]}
    by_time = sorted((r for r in body["trace"]["results"] if "temporal" in r["ranks"]),
                     key=lambda r: r["ranks"]["temporal"])
    return [texts[r["id"]] for r in by_time]


def test_a_period_finds_what_was_said_in_it_and_nothing_else(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": text, "timestamp": when, "document_id": f"turn-{n}"} for n, (text, when) in enumerate(SAID)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    # Said on the 20th and 21st: inside August, neither touching its first day.
    assert sorted(temporal_ranking(http, bank_id, "What happened in August 2023?")) == sorted([SAID[1][0], SAID[2][0]])
    # Said in May, and an event spanning it.
    may = temporal_ranking(http, bank_id, "What did they do in May 2023?")
    assert sorted(t.split(" | ")[0] for t in may) == sorted([SAID[0][0], SAID[4][0]]), may
    # Inside the event's span, neither end in the window.
    april = temporal_ranking(http, bank_id, "What happened in April 2023?")
    assert [t.split(" | ")[0] for t in april] == [SAID[4][0]], april
    assert temporal_ranking(http, bank_id, "What happened in March 2021?") == []


def test_a_window_given_end_first_finds_what_spans_it_and_is_no_error(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": text, "timestamp": when, "document_id": f"turn-{n}"} for n, (text, when) in enumerate(SAID)]
    assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).status_code == 200
    # Said before the window's "end" and ending after its "start": only the spring event qualifies.
    body = {"query": "garden party", "trace": True,
            "temporal_window": {"start": "2023-04-20T00:00:00Z", "end": "2023-04-10T00:00:00Z"}}
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json=body)
    assert response.status_code == 200, response.text
    texts = {r["id"]: r["text"] for r in response.json()["results"]}
    found = [texts[r["id"]].split(" | ")[0] for r in response.json()["trace"]["results"] if "temporal" in r["ranks"]]
    assert found == [SAID[4][0]]
