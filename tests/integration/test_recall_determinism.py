"""Recall is deterministic: the same data and query give the same ranking, asked twice of one bank and
asked of two banks that each ingested the same data (their ids differ, so rankings are compared by
text). Equal scores are common offline (facts matching the same one word, facts of one session), so
every tie needs an order that does not depend on the order rows come out of the database."""

from __future__ import annotations

import asyncpg
import httpx

from engram.recall.arms import SCORE_DECIMALS, rounded_score

NAMES = ["Ana", "Ben", "Caro", "Dev", "Eli", "Fay", "Gus", "Hana"]
THINGS = ["lamp", "desk", "chair", "kettle", "rug", "mirror", "clock", "shelf", "vase", "stool"]
# Many turns of one shape: they tie in the keyword arm (the same words, the same length) and in the
# final boosts (one session's date), and the semantic arm barely tells them apart.
TURNS = [f"{NAMES[i % len(NAMES)]}: I bought a new {THINGS[i % len(THINGS)]} on Saturday." for i in range(40)] + [
    "Ana: The market was crowded, we queued for an hour.",
    "Ben: Prices went up again this year.",
    "Caro: My sister sells furniture at the flea market.",
    "Dev: We painted the kitchen green last week.",
]
# The same words said in several documents tie on every score: only what the facts hold (their text,
# date, document) may order them, never their ids.
REMINDER = "Gus: See you all at the market next Saturday!"
REMINDERS = 4
QUERIES = ["Who bought something new on Saturday?", "What furniture did people buy?", "market", "kitchen colour",
           "See you at the market"]
WHEN = "2024-03-02T18:00:00Z"


def ingest(http: httpx.Client, bank_id: str) -> None:
    sessions = [TURNS[i : i + 11] for i in range(0, len(TURNS), 11)]
    items = [{"content": "\n".join(lines), "timestamp": WHEN, "document_id": f"session-{n}"}
             for n, lines in enumerate(sessions)]
    items += [{"content": REMINDER, "timestamp": WHEN, "document_id": f"reminder-{n}"} for n in range(REMINDERS)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


def ranking(http: httpx.Client, bank_id: str, query: str) -> list[tuple[str, str | None]]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": query, "max_tokens": 8192, "query_timestamp": WHEN})
    assert response.status_code == 200, response.text
    return [(r["text"], r.get("document_id")) for r in response.json()["results"]]


def test_the_same_query_twice_ranks_the_same(http: httpx.Client, bank_id: str) -> None:
    ingest(http, bank_id)
    for query in QUERIES:
        first = ranking(http, bank_id, query)
        assert len(first) >= 5, (query, first)
        assert ranking(http, bank_id, query) == first, query


def test_two_fresh_ingests_of_the_same_data_rank_the_same(http: httpx.Client, bank_id: str) -> None:
    other = f"{bank_id}-again"
    ingest(http, bank_id)
    ingest(http, other)
    for query in QUERIES:
        mine, theirs = ranking(http, bank_id, query), ranking(http, other, query)
        assert len(mine) >= 5, (query, mine)
        assert mine == theirs, query
    reminders = [document for text, document in ranking(http, bank_id, "See you at the market")
                 if text.split(" | ")[0] == REMINDER]
    assert sorted(reminders) == [f"reminder-{n}" for n in range(REMINDERS)], reminders


async def test_arm_scores_are_rounded_so_that_sums_taken_in_another_order_tie(pg_dsn: str) -> None:
    # PostgreSQL adds a fact's terms in no fixed order: the same terms can sum to values a last bit
    # apart, which would order near-ties by chance. Rounded (in float arithmetic, as the arms' SQL
    # does), they are equal, and each value is the nearest float to its decimal rounding.
    left, right = (0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3)
    assert left != right
    values = [left, right, 1 / 3, 12.3456789012345, 0.25, 0.0, 7.0]
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch(f"SELECT {rounded_score('x')} AS rounded"
                                " FROM unnest($1::float8[]) WITH ORDINALITY AS u(x, n) ORDER BY n", values)
    finally:
        await conn.close()
    assert [row["rounded"] for row in rows] == [round(value, SCORE_DECIMALS) for value in values]
