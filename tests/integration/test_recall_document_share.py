"""The document's share in recall (engram.recall.documents): a concrete turn that shares no word with
an abstract question ("activities" vs "marshmallows") is found through the turn of its conversation
that the question matches, above turns of other conversations that repeat the question's words."""

from __future__ import annotations

import httpx

CAMPING = [  # one session: the trip is named once, what was done there in a turn of its own
    "Melanie: Our family enjoys camping trips so much, we just got back from the mountains!",
    "Caroline: Oh fun! What did you all get up to?",
    "Melanie: We roasted marshmallows and told ghost stories around the fire every night.",
    "Caroline: That sounds lovely, I need a break like that.",
]
OTHER_SESSIONS = [
    ["Caroline: Camping trips are not my thing, too many bugs.",
     "Melanie: Fair enough, they are not for everyone.",
     "Caroline: I would rather stay in a hotel by the sea."],
    ["Melanie: The kids were so brave at the dentist this morning.",
     "Caroline: Good for them!",
     "Melanie: We are planning a road trip with the whole family this summer."],
    ["Caroline: Family dinners are my favourite part of the week.",
     "Melanie: Same here, we all cook together on Sundays.",
     "Caroline: My brother is visiting next month."],
]


def test_a_concrete_turn_is_found_through_its_conversation(http: httpx.Client, bank_id: str) -> None:
    sessions = [CAMPING, *OTHER_SESSIONS]
    items = [{"content": "\n".join(turns), "document_id": f"session-{n}", "timestamp": f"2023-0{n + 5}-10T10:00:00Z"}
             for n, turns in enumerate(sessions)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "What activities does Melanie's family enjoy on camping trips?",
                               "query_timestamp": "2023-09-01T00:00:00Z"})
    assert response.status_code == 200, response.text
    ranked = [r["text"] for r in response.json()["results"]]
    concrete = ranked.index(CAMPING[2])
    elsewhere = [ranked.index(turn) for turns in OTHER_SESSIONS for turn in turns if turn in ranked]
    assert concrete < min(elsewhere), ranked
