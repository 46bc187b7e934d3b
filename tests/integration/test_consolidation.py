"""Consolidation end to end with a scripted LLM: the seed's three narrated cases (refine, contradict,
something new), scope isolation, near-duplicate merge, lifecycle on deletes, and failures that
never lose or duplicate an observation."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle

REACT = "The user loves React for frontend work."
REACT_AGAIN = "The user built another React dashboard and enjoyed it."
VUE = "The user switched to Vue in March 2024 because React felt heavy."
DOG = "The user adopted a dog named Biscuit."


def fact_line(request, text: str) -> str | None:
    """The handle (F1, F2…) the consolidation prompt gave `text`, if it was shown."""
    for line in request.user_text.splitlines():
        if line.startswith("F") and line.endswith(text):
            return line.split(" ", 1)[0]
    return None


def observation_handle(request, words: str) -> str | None:
    for line in request.user_text.splitlines():
        if line.startswith("O") and words in line:
            return line.split(" ", 1)[0]
    return None


class Script:
    """Extraction: each retained text is one fact. Consolidation: decided by `decide(request)`."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.decide: Callable = lambda request: {"creates": [], "updates": [], "deletes": []}
        llm.handler = self.answer

    def answer(self, request):
        if request.schema_name == "ExtractionOutput":
            text = request.user_text.split("Text:\n", 1)[1].strip()
            return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"], "occurred_start": None}]}
        if request.schema_name == "ConsolidationActions":
            return self.decide(request)
        if request.schema_name == "MergeDecision":
            return {"decision": "merge", "text": None}
        return Reply.error(400, f"unexpected schema {request.schema_name}")


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


def retain_and_settle(http: httpx.Client, bank_id: str, text: str, **item: object) -> None:
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": text, **item}]}).raise_for_status()
    settle(http, bank_id)




def observations(http: httpx.Client, bank_id: str) -> list[dict]:
    return http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "observation"}).json()["items"]


def test_refine_contradict_and_something_new(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    shown_to_dog: list[str | None] = []

    def decide(request):
        if handle := fact_line(request, REACT):
            return {"creates": [{"text": "The user prefers React for frontend development",
                                 "evidence": [{"fact": handle, "quote": "loves React"}]}]}
        if handle := fact_line(request, REACT_AGAIN):
            return {"updates": [{"observation": observation_handle(request, "React"),
                                 "text": "The user consistently prefers React for frontend development",
                                 "evidence": [{"fact": handle, "quote": "enjoyed it"}]}]}
        if handle := fact_line(request, VUE):
            # A model that overwrites: it deletes the contradicted belief and creates a new one. The engine
            # refines instead: the create becomes a rewrite of the old observation, history kept.
            return {"deletes": [{"observation": observation_handle(request, "React"), "reason": "now prefers Vue"}],
                    "creates": [{"text": "The user used to prefer React but switched to Vue in March 2024",
                                 "evidence": [{"fact": handle, "quote": "switched to Vue in March 2024"}]}]}
        if handle := fact_line(request, DOG):
            shown_to_dog.append(observation_handle(request, "Vue"))
            return {"creates": [{"text": "The user has a dog named Biscuit",
                                 "evidence": [{"fact": handle, "quote": "adopted a dog named Biscuit"}]}]}
        return {}

    script.decide = decide
    retain_and_settle(http, bank_id, REACT)
    (first,) = observations(http, bank_id)
    assert first["proof_count"] == 1
    assert uuid.UUID(first["id"]).version == 7, "an observation's id starts with its creation time"

    retain_and_settle(http, bank_id, REACT_AGAIN)  # refine
    shown = [r for r in llm.requests if r.schema_name == "ConsolidationActions"][-1].user_text
    assert f"    - source: {REACT}" in shown, "the observation is shown with the facts it rests on"
    (refined,) = observations(http, bank_id)
    assert refined["id"] == first["id"] and refined["proof_count"] == 2
    history = http.get(f"/v1/default/banks/{bank_id}/memories/{refined['id']}/history").json()["history"]
    assert [h["text"] for h in history] == ["The user prefers React for frontend development"]

    retain_and_settle(http, bank_id, VUE)  # contradict
    contradiction = [r for r in llm.requests if r.schema_name == "ConsolidationActions"][-1].system_prompt
    assert "do NOT\n  delete it" in contradiction, "the prompt tells the LLM a change of state is no reason to delete"
    (evolved,) = observations(http, bank_id)
    assert evolved["id"] == first["id"], "the contradicted observation is refined, not deleted and replaced"
    assert evolved["text"] == "The user used to prefer React but switched to Vue in March 2024"
    assert evolved["proof_count"] == 3, "it rests on all three facts"
    history = http.get(f"/v1/default/banks/{bank_id}/memories/{evolved['id']}/history").json()["history"]
    assert [h["text"] for h in history] == ["The user consistently prefers React for frontend development",
                                             "The user prefers React for frontend development"]
    detail = http.get(f"/v1/default/banks/{bank_id}/memories/{evolved['id']}").json()
    assert detail["evidence"][-1]["quote"] == "switched to Vue in March 2024"

    retain_and_settle(http, bank_id, DOG)  # something new
    assert shown_to_dog == ["O1"], "the unrelated observation was shown, and the create did not bend it"
    found = {o["text"]: o for o in observations(http, bank_id)}
    assert found["The user has a dog named Biscuit"]["proof_count"] == 1
    assert len(found) == 2, "a new facet is a new observation, not a bent old one"

    facts = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "world"}).json()["items"]
    assert all(f["consolidated_at"] for f in facts)
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                         json={"query": "Which frontend framework does the user like?", "types": ["observation"],
                               "include": {"source_facts": {}}}).json()
    top = recalled["results"][0]
    assert top["type"] == "observation" and len(top["source_fact_ids"]) == 3
    assert set(top["source_fact_ids"]) <= set(recalled["source_facts"])


def test_scopes_never_see_each_others_observations(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    shown: list[str] = []

    def decide(request):
        shown.append(request.user_text)
        handle = next(line.split(" ", 1)[0] for line in request.user_text.splitlines() if line.startswith("F1"))
        fact = next(line for line in request.user_text.splitlines() if line.startswith("F1"))
        return {"creates": [{"text": "Observation about " + fact.split(": ", 1)[1],
                             "evidence": [{"fact": handle, "quote": fact.split(": ", 1)[1]}]}]}

    script.decide = decide
    retain_and_settle(http, bank_id, "Alice likes green tea.", tags=["user:alice"])
    retain_and_settle(http, bank_id, "Bob likes green tea too.", tags=["user:bob"])
    assert "Alice" not in shown[-1], "bob's consolidation is not shown alice's observation"
    scopes = {tuple(o["tags"]) for o in observations(http, bank_id)}
    assert scopes == {("user:alice",), ("user:bob",)}
    alice_only = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                           json={"query": "green tea", "types": ["observation"], "tags": ["user:alice"],
                                 "tags_match": "all_strict"}).json()["results"]
    assert [r["tags"] for r in alice_only] == [["user:alice"]]


def test_shared_scope_builds_one_global_belief(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)

    def decide(request):
        handle = fact_line(request, request.user_text.splitlines()[-1].split(": ", 1)[1])
        existing = observation_handle(request, "standup")
        if existing:
            return {"updates": [{"observation": existing, "text": "The team holds a daily standup at 9:30",
                                 "evidence": [{"fact": handle, "quote": "standup"}]}]}
        return {"creates": [{"text": "The team holds a daily standup at 9:30",
                             "evidence": [{"fact": handle, "quote": "standup"}]}]}

    script.decide = decide
    for session in ("s1", "s2", "s3"):
        retain_and_settle(http, bank_id, f"In session {session} the team had its daily standup at 9:30.",
                          tags=[f"session:{session}"], observation_scopes="shared")
    (belief,) = observations(http, bank_id)
    assert belief["tags"] == [] and belief["proof_count"] == 3
    global_only = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                            json={"query": "standup", "types": ["observation"], "tags": [],
                                  "tags_match": "exact"}).json()["results"]
    assert [r["id"] for r in global_only] == [belief["id"]]


def test_deleting_a_source_keeps_observations_consistent(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    script.decide = lambda request: (
        {"updates": [{"observation": observation_handle(request, "runs"), "text": "The user runs every morning",
                      "evidence": [{"fact": "F1", "quote": "runs"}]}]}
        if observation_handle(request, "runs")
        else {"creates": [{"text": "The user runs every morning", "evidence": [{"fact": "F1", "quote": "runs"}]}]}
    )
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user runs at 6am.", "document_id": "a"}]}).raise_for_status()
    settle(http, bank_id)
    http.post(f"/v1/default/banks/{bank_id}/memories",
              json={"items": [{"content": "The user runs before work.", "document_id": "b"}]}).raise_for_status()
    settle(http, bank_id)
    (observation,) = observations(http, bank_id)
    assert observation["proof_count"] == 2

    script.decide = lambda request: {}  # re-consolidation of the remaining source changes nothing
    http.delete(f"/v1/default/banks/{bank_id}/documents/a").raise_for_status()
    settle(http, bank_id)
    (kept,) = observations(http, bank_id)
    assert kept["proof_count"] == 1 and len(kept["source_memory_ids"]) == 1

    http.delete(f"/v1/default/banks/{bank_id}/documents/b").raise_for_status()
    settle(http, bank_id)
    assert observations(http, bank_id) == [], "an observation with no source left is deleted"


def test_clearing_observations(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    script.decide = lambda request: {"creates": [{"text": "The user drinks coffee",
                                                  "evidence": [{"fact": "F1", "quote": "coffee"}]}]}
    retain_and_settle(http, bank_id, "The user drinks coffee daily.")
    (fact,) = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "world"}).json()["items"]
    (before,) = observations(http, bank_id)

    cleared = http.delete(f"/v1/default/banks/{bank_id}/memories/{fact['id']}/observations").json()
    assert cleared == {"deleted_count": 1}
    settle(http, bank_id)
    (after,) = observations(http, bank_id)
    assert after["id"] != before["id"], "consolidation ran again and produced a fresh observation"

    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
    assert http.delete(f"/v1/default/banks/{bank_id}/observations").json()["deleted_count"] == 1
    (fact,) = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "world"}).json()["items"]
    assert fact["consolidated_at"] is None, "every source waits for consolidation again"
    assert observations(http, bank_id) == []

    http.post(f"/v1/default/banks/{bank_id}/consolidate").raise_for_status()  # one pending job: see
    settle(http, bank_id)  # test_consolidation_policies.py::test_one_consolidation_job_waits_per_bank
    assert len(observations(http, bank_id)) == 1


def test_garbage_answers_halve_then_mark_the_fact_failed(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
    for text in ("The user likes tea.", "The user likes jazz.", "The user hates mornings."):
        retain_and_settle(http, bank_id, text)

    def decide(request):
        if "mornings" in " ".join(str(m.get("content")) for m in request.messages):  # also on the retries
            return Reply.text("not json at all")
        new_facts = [line for line in request.user_text.splitlines() if line.startswith("F")]
        handles = [line.split(" ", 1)[0] for line in new_facts]
        text = "Tea is the user's favourite drink" if "tea" in new_facts[0] else "The user listens to jazz"
        return {"creates": [{"text": text, "evidence": [{"fact": h, "quote": "likes"}]} for h in handles[:1]]}

    script.decide = decide
    http.post(f"/v1/default/banks/{bank_id}/consolidate").raise_for_status()
    stats = settle(http, bank_id)
    assert stats["failed_consolidation"] == 1
    assert stats["pending_consolidation"] == 0
    failed = http.get(f"/v1/default/banks/{bank_id}/memories/list",
                      params={"consolidation_state": "failed"}).json()["items"]
    assert [f["text"] for f in failed] == ["The user hates mornings."]
    assert len(observations(http, bank_id)) == 2


def test_a_provider_outage_fails_the_operation_and_loses_nothing(http: httpx.Client, llm: ScriptedLLM,
                                                                 bank_id: str) -> None:
    script = Script(llm)
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
    retain_and_settle(http, bank_id, "The user collects vinyl records.")
    trace = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                      json={"query": "vinyl", "trace": True}).json()["trace"]
    assert trace["observations_freshness"] == {"state": "slightly_stale", "pending_facts": 1}
    script.decide = lambda request: Reply.error(503, "overloaded")
    op = http.post(f"/v1/default/banks/{bank_id}/consolidate").json()
    settle(http, bank_id)
    status = http.get(f"/v1/default/banks/{bank_id}/operations/{op['operation_id']}").json()
    assert status["status"] == "failed" and "503" in status["error_message"]
    assert observations(http, bank_id) == []
    stats = http.get(f"/v1/default/banks/{bank_id}/stats").json()
    assert stats["pending_consolidation"] == 1 and stats["failed_consolidation"] == 0

    script.decide = lambda request: {"creates": [{"text": "The user collects vinyl",
                                                  "evidence": [{"fact": "F1", "quote": "vinyl"}]}]}
    http.post(f"/v1/default/banks/{bank_id}/operations/{op['operation_id']}/retry").raise_for_status()
    settle(http, bank_id)
    assert [o["text"] for o in observations(http, bank_id)] == ["The user collects vinyl"]
    trace = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                      json={"query": "vinyl", "trace": True}).json()["trace"]
    assert trace["observations_freshness"]["state"] == "up_to_date"


def test_near_duplicates_are_merged_with_their_evidence(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = Script(llm)
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"consolidation_dedup_threshold": 0.9}})
    # A weak model creates a near-identical observation instead of refining the existing one.
    script.decide = lambda request: {"creates": [{"text": "The user is allergic to peanuts.",
                                                  "evidence": [{"fact": "F1", "quote": "peanuts"}]}]}
    retain_and_settle(http, bank_id, "The user said they are allergic to peanuts.")
    script.decide = lambda request: {"creates": [{"text": "The user is allergic to peanuts",
                                                  "evidence": [{"fact": "F1", "quote": "peanut"}]}]}
    retain_and_settle(http, bank_id, "The user mentioned a peanut allergy again.")
    (merged,) = observations(http, bank_id)
    assert merged["proof_count"] == 2
    assert any(r.schema_name == "MergeDecision" for r in llm.requests)
