"""The speaker's boost: a question naming a person is answered by what that person said, not by the
turns of the others that talk to them about it (engram.recall.speakers)."""

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
