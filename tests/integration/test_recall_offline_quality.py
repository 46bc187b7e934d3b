"""What the no-LLM pipeline adds to plain retrieval, each checked where plain retrieval misses: a reply
found by the question it answers, a long turn found by its one relevant sentence, and rare words
outweighing common ones in the keyword arm."""

from __future__ import annotations

import httpx

CHAT = [
    "Caroline: Morning! Did you sleep well after the concert?",
    "Melanie: Not really, the neighbours had a party until two.",
    "Caroline: Ugh. Have you ever been to the Grand Canyon?",
    "Melanie: Yes, twice! Best trip of my life.",
    "Caroline: I keep seeing photos of Zion and Bryce national parks.",
    "Melanie: Hiking in the Alps last summer was the best trip of my life.",
    "Caroline: I walked along the river in Portland on Sunday.",
    "Melanie: The kids want to go camping at the lake again this weekend.",
    "Caroline: We drove through Arizona on a road trip in college.",
    "Melanie: My brother is a park ranger in Yosemite.",
    "Caroline: Arches national park was stunning at sunset.",
    "Caroline: Work has been crazy this month, I barely left the office. The printer broke twice and the "
    "coffee machine too. Oh, and I finally adopted a puppy from the shelter last Friday! Anyway, the quarterly "
    "report is due soon and my manager keeps moving the deadline.",
    "Melanie: Our neighbour's cat keeps sneaking into the garden.",
    "Caroline: My sister bought a parrot that says hello to everyone.",
    "Melanie: The kids watched a documentary about wolves.",
    "Caroline: The vet said the hamster is perfectly healthy.",
]


def retain_chat(http: httpx.Client, bank_id: str) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "\n".join(CHAT), "timestamp": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text


def top_texts(http: httpx.Client, bank_id: str, query: str, k: int) -> list[str]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query})
    assert response.status_code == 200, response.text
    return [r["text"] for r in response.json()["results"][:k]]


def test_a_reply_is_found_by_the_question_it_answers(http: httpx.Client, bank_id: str) -> None:
    retain_chat(http, bank_id)
    top = top_texts(http, bank_id, "Who has been to the Grand Canyon?", 2)
    assert any(text.startswith("Melanie: Yes, twice!") for text in top), top


def test_a_long_turn_is_found_by_its_relevant_sentence(http: httpx.Client, bank_id: str) -> None:
    retain_chat(http, bank_id)
    top = top_texts(http, bank_id, "Does anyone have a new dog?", 1)
    assert "adopted a puppy" in top[0], top


def test_rare_words_outweigh_common_ones_in_the_keyword_arm(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": f"The weekly meeting number {n} covered the meeting notes of the last meeting."}
             for n in range(12)] + [{"content": "Priya fixed the zeppelin model."}]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "meeting about the zeppelin", "trace": True}).json()
    by_keyword = sorted((r for r in response["trace"]["results"] if "keyword" in r["ranks"]),
                        key=lambda r: r["ranks"]["keyword"])
    texts = {r["id"]: r["text"] for r in response["results"]}
    assert texts[by_keyword[0]["id"]] == "Priya fixed the zeppelin model."


WORK_NOTES = [
    "Priya refactored the billing service's retry logic.",
    "Tom drafted the hiring plan for the data team.",
    "Lena fixed the flaky login test on CI.",
    "Marco migrated the reports dashboard to the new charting library.",
    "Priya reviewed the pull request for invoice exports.",
    "Tom interviewed two candidates for the backend role.",
]


def test_a_vague_query_gets_the_best_available_facts(http: httpx.Client, bank_id: str) -> None:
    """No note shares a word with the question and none is within MiniLM's 0.3 cosine of it: a fixed
    floor returned nothing. With no floor from the caller the best hits are kept; a caller's own
    `min_scores.semantic` is still an absolute floor."""
    response = http.post(f"/v1/default/banks/{bank_id}/memories",
                         json={"items": [{"content": note} for note in WORK_NOTES]})
    assert response.status_code == 200, response.text
    query = "What has everyone been working on?"
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": query, "trace": True}).json()
    assert len(recalled["results"]) >= 3, recalled["results"]
    assert all(r["scores"]["semantic"] < 0.3 for r in recalled["results"])  # all below the old floor
    assert not any("keyword" in r["ranks"] for r in recalled["trace"]["results"])  # found by meaning alone
    floored = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                        json={"query": query, "min_scores": {"semantic": 0.3}}).json()
    assert floored["results"] == []


VESPA_CHAT = [
    "Melanie: Guess what, I finally have my own scooter!",
    "Caroline: No way! Where from?",
    "Melanie: Got it last spring in Rome, from an old mechanic near the station.",
    "Melanie: The Vespa still runs like new, I ride it to the studio every morning.",
    "Caroline: I spent the weekend planting tomatoes and basil on the balcony.",
    "Caroline: Our neighbours adopted two kittens.",
    "Caroline: The bakery on our street closed for good.",
    "Caroline: I finished reading that long novel about whales.",
    "Caroline: My brother started a new job at the bank.",
    "Caroline: We painted the kitchen a pale green.",
    "Melanie: I picked up new running shoes at the mall.",
    "Melanie: My neighbour lent me his ladder for the weekend.",
    "Melanie: We ordered a second-hand sofa online.",
]


def test_a_turn_that_needs_its_neighbour_is_found_through_it(http: httpx.Client, bank_id: str) -> None:
    """"Got it last spring in Rome" names no Vespa; on its own it ranks below a turn about another
    purchase ("a second-hand sofa"), which the meaning and the words of the question match better.
    Next to the turn that names the Vespa it gets a share of that turn's score and ranks above it."""
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "\n".join(VESPA_CHAT), "timestamp": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text
    ranked = top_texts(http, bank_id, "Where did Melanie get her Vespa?", 20)
    rome = next(i for i, text in enumerate(ranked) if text.startswith("Melanie: Got it last spring in Rome"))
    sofa = next(i for i, text in enumerate(ranked) if text.startswith("Melanie: We ordered a second-hand sofa"))
    assert ranked[0].startswith("Melanie: The Vespa still runs like new")
    assert rome < sofa, ranked


def test_words_in_most_facts_bring_no_keyword_candidates(http: httpx.Client, bank_id: str) -> None:
    """A query of only such words ("Caroline", "Melanie" name most turns) once made every fact matching
    them a keyword candidate scoring 0: 300 of them, picked by id (so two ingests ranked differently),
    fused as if all were the keyword arm's best."""
    retain_chat(http, bank_id)
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "Caroline and Melanie", "trace": True})
    assert response.status_code == 200, response.text
    trace = response.json()["trace"]
    assert "keyword" not in trace["arms"] or trace["arms"]["keyword"]["count"] == 0, trace["arms"]
