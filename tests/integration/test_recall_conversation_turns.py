"""What recall makes of conversation turns: a question naming a person is answered by what that person
said, not by the turns of the others that talk to them about it (engram.recall.speakers), and the reply
to a turn asking a question shares more of its score than the turn before it (engram.recall.neighbours);
a question asking where prefers the fact naming a place (engram.recall.kinds)."""

from __future__ import annotations

import httpx

FILLER = [
    "Melanie: The kids started school again on Monday.",
    "Caroline: I finally finished the book about the lighthouse keeper.",
    "Melanie: We are thinking of repainting the kitchen yellow.",
    "Caroline: My cousin is getting married in June.",
    "Melanie: The garden is full of tomatoes this year.",
    "Caroline: I signed up for a pottery workshop downtown.",
    "Melanie: Our car broke down on the highway again.",
    "Caroline: The new cafe near my flat makes great croissants.",
    "Melanie: My husband is learning to play the guitar.",
    "Caroline: I watched a documentary about whales yesterday.",
    "Melanie: The dog chewed my favourite slippers.",
    "Caroline: Work has been hectic with the quarterly reports.",
]
# Caroline's turn names Melanie and shares more of the question's words; Melanie's says what she does.
ASKED_ABOUT_HER = "Caroline: Melanie, do you unwind with yoga after a stressful week?"
SAID_BY_HER = "Melanie: Running by the river every evening is how I unwind after stress."
CHAT = FILLER[:6] + [ASKED_ABOUT_HER] + FILLER[6:9] + [SAID_BY_HER] + FILLER[9:]


def test_the_person_a_question_names_answers_it_before_those_who_talk_to_them(
    http: httpx.Client, bank_id: str
) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "\n".join(CHAT), "timestamp": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "How does Melanie relax after stress?"})
    assert response.status_code == 200, response.text
    top = [r["text"] for r in response.json()["results"][:2]]
    assert top[0].startswith(SAID_BY_HER.removesuffix(".")), top
    assert top[1] == ASKED_ABOUT_HER, top


QUESTION = "Caroline: What are the names of your pets?"
BEFORE = "Melanie: A garden full of tomatoes is my summer project."
REPLY = "Melanie: Biscuit and Pepper! We got them last spring."


def test_the_reply_to_a_question_shares_more_of_its_score_than_the_turn_before_it(
    http: httpx.Client, bank_id: str
) -> None:
    """Both neighbours of the question share none of the query's words (the reply's lead-in does, but it
    is the keyword arm's last hit: 0 once scaled); the reply is the answer and gets REPLY_SHARE of the
    question's score, the turn before NEIGHBOUR_SHARE (engram.recall.neighbours)."""
    chat = FILLER[:5] + [BEFORE, QUESTION, REPLY] + FILLER[5:]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "\n".join(chat), "timestamp": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "What are the pets called?", "trace": True})
    assert response.status_code == 200, response.text
    body = response.json()
    texts = {r["id"]: r["text"].split(" | ")[0] for r in body["results"]}
    fused = {texts[r["id"]]: r["fused"] for r in body["trace"]["results"]}
    assert max(fused, key=fused.__getitem__) == QUESTION, fused
    assert [t for t in texts.values() if t in (REPLY, BEFORE)] == [REPLY, BEFORE]
    # the question's own score is its fused one less the document's share of it (0.4 × itself) and
    # its neighbours' shares, so a tenth of its fused score is a clear margin below a fifth of its own
    assert fused[REPLY] - fused[BEFORE] >= 0.1 * fused[QUESTION], fused


HIKING = [
    "Tim: I finished the fantasy series I was reading.",
    "John: Nice! I had a big game on Friday.",
    "Tim: Last summer we went hiking and it was the best trip ever.",
    "John: Hiking is great, I love hiking trips with friends.",
    "Tim: We camped by Lake Tahoe for two weeks.",
    "Tim: My sister is learning the violin.",
]


def test_a_question_asking_where_prefers_the_fact_naming_a_place(http: httpx.Client, bank_id: str) -> None:
    """"Lake Tahoe" is a place to the offline extractor (a place word opens the name); the turn about
    the hike shares more of the question's words, the turn naming the place answers it
    (engram.recall.kinds)."""
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "\n".join(HIKING), "timestamp": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "Where did Tim go hiking?"})
    assert response.status_code == 200, response.text
    top = [r["text"].split(" | ")[0] for r in response.json()["results"][:2]]
    assert top == ["Tim: We camped by Lake Tahoe for two weeks.",
                   "Tim: Last summer we went hiking and it was the best trip ever."], top
