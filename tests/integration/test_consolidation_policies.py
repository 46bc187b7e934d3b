"""Consolidation policies decided by the engine, not by the scripted LLM: the dedup threshold (which
pairs get a merge-or-keep check at all), missions reaching the prompt, per-scope caps, targeted
consolidation, re-consolidation after deletions and clears, exact evidence quotes, and deletes that
become refinements. Each scripted answer asks for something; the assertions check what the engine did
with it."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from engram.consolidate.prompt import DEFAULT_RULES
from engram.models.embedder import embedder
from tests.conftest import RunningServer
from tests.integration.test_consolidation import Script, fact_line, observation_handle, observations
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM
from tests.support.waiting import settle, wait_for

PEANUTS = "The user is allergic to peanuts."
PEANUTS_TWIN = "The user is allergic to peanuts"  # cosine 0.994 with PEANUTS
PEANUTS_WIDER = "The user is allergic to peanuts and tree nuts."  # cosine 0.936
VIOLIN = "The user plays the violin."  # cosine 0.117


class PolicyScript(Script):
    """Script, with the merge-or-keep answer chosen by the test."""

    def __init__(self, llm: ScriptedLLM) -> None:
        super().__init__(llm)
        self.merge: dict = {"decision": "merge", "text": None}

    def answer(self, request: ChatRequest):
        if request.schema_name == "MergeDecision":
            return self.merge
        return super().answer(request)


def create_each_fact(prefix: str = "Belief: "):
    """A consolidation answer creating one observation per new fact, quoting it whole."""

    def decide(request: ChatRequest) -> dict:
        creates = []
        for line in request.user_text.splitlines():
            if line.startswith("F") and "]: " in line:
                handle, text = line.split(" ", 1)[0], line.split("]: ", 1)[1]
                creates.append({"text": prefix + text, "evidence": [{"fact": handle, "quote": text}]})
        return {"creates": creates}

    return decide


def consolidation_requests(llm: ScriptedLLM, since: int = 0) -> list[ChatRequest]:
    return [r for r in llm.requests[since:] if r.schema_name == "ConsolidationActions"]


def merge_requests(llm: ScriptedLLM) -> list[ChatRequest]:
    return [r for r in llm.requests if r.schema_name == "MergeDecision"]


def cosine(a: str, b: str) -> float:
    first, second = embedder().embed([a, b])
    return float(np.dot(first, second))


def configure(http: httpx.Client, bank_id: str, **updates: object) -> None:
    response = http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": updates})
    assert response.status_code == 200, response.text


def retain(http: httpx.Client, bank_id: str, text: str, **item: object) -> None:
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": text, **item}]}).raise_for_status()
    settle(http, bank_id)


def facts(http: httpx.Client, bank_id: str) -> dict[str, dict]:
    items = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"type": "world"}).json()["items"]
    return {f["text"]: f for f in items}


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


# --- near-duplicate reconciliation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "second", "checked"),
    [
        (None, PEANUTS_TWIN, True),  # the default, 0.97: a 0.994 pair is checked
        (None, PEANUTS_WIDER, False),  # … a 0.936 pair is not
        (0.9, PEANUTS_WIDER, True),  # a lower value reconciles more
        (1.0, PEANUTS_TWIN, False),  # 1.0 disables the check
        (0.0, VIOLIN, True),  # 0.0 is honoured, not read as "unset"
        (0.5, VIOLIN, False),
    ],
)
def test_the_configured_dedup_threshold_decides_which_pairs_are_checked(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str, threshold: float | None, second: str, checked: bool
) -> None:
    similarity = cosine(PEANUTS, second)
    assert (similarity >= (0.97 if threshold is None else threshold)) is checked, f"fixture pair at {similarity}"
    script = PolicyScript(llm)
    script.merge = {"decision": "keep", "text": None}
    script.decide = create_each_fact(prefix="")
    if threshold is not None:
        configure(http, bank_id, consolidation_dedup_threshold=threshold)
    retain(http, bank_id, PEANUTS)
    retain(http, bank_id, second)  # the scripted LLM creates a second observation instead of refining
    assert bool(merge_requests(llm)) is checked
    if checked:
        (request,) = merge_requests(llm)
        assert PEANUTS in request.user_text and second in request.user_text
    assert sorted(o["text"] for o in observations(http, bank_id)) == sorted([PEANUTS, second])


@pytest.mark.parametrize(("decision", "expected"), [("merge", 1), ("keep", 2)])
def test_the_merge_or_keep_answer_decides(http: httpx.Client, llm: ScriptedLLM, bank_id: str,
                                          decision: str, expected: int) -> None:
    script = PolicyScript(llm)
    script.merge = {"decision": decision, "text": None}
    script.decide = create_each_fact(prefix="")
    retain(http, bank_id, PEANUTS)
    retain(http, bank_id, PEANUTS_TWIN)
    found = observations(http, bank_id)
    assert len(found) == expected
    if decision == "merge":
        assert found[0]["proof_count"] == 2, "both sets of evidence are folded together"


def test_reconciliation_never_compares_across_scopes(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = create_each_fact(prefix="")
    retain(http, bank_id, PEANUTS, tags=["user:a"])
    retain(http, bank_id, PEANUTS, tags=["user:b"])
    assert merge_requests(llm) == [], "an identical observation in another scope is not a near-duplicate"
    retain(http, bank_id, PEANUTS_TWIN, tags=["user:a"])
    assert len(merge_requests(llm)) == 1


# --- missions and caps ---------------------------------------------------------------------------------


def test_missions_reach_the_prompt_of_their_scope_only(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = create_each_fact()
    configure(http, bank_id, observations_mission="BANK-MISSION: record only food preferences.",
              consolidation_strategies=[
                  # matches observation scopes, not memory tags: none of the three scopes has both
                  {"scopes": [{"tags": ["company:*", "team:*"]}], "observations_mission": "BOTH-MISSION"},
                  {"scopes": [{"tags": ["team:*"]}], "observations_mission": "TEAM-MISSION: record decisions."},
                  {"scopes": [{"tags": ["company:*"]}], "max_observations_per_scope": 20},
              ])
    retain(http, bank_id, "Dana told the exec team that Acme signed a GPU lease.",
           tags=["user:dana", "team:exec", "company:acme"],
           observation_scopes=[["user:dana"], ["team:exec"], ["company:acme"]])
    prompts = {r.user_text.splitlines()[0]: r.system_prompt for r in consolidation_requests(llm)}
    assert set(prompts) == {"Scope: user:dana", "Scope: team:exec", "Scope: company:acme"}, "one call per scope"
    assert "TEAM-MISSION" in prompts["Scope: team:exec"] and "BANK-MISSION" not in prompts["Scope: team:exec"]
    for scope in ("Scope: user:dana", "Scope: company:acme"):  # no strategy mission: the bank's
        assert "BANK-MISSION" in prompts[scope] and "TEAM-MISSION" not in prompts[scope]
    assert all(DEFAULT_RULES not in prompt for prompt in prompts.values()), "a mission replaces the built-in rules"
    assert not any("BOTH-MISSION" in prompt for prompt in prompts.values())


def test_a_blank_mission_means_the_built_in_rules(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = create_each_fact()
    configure(http, bank_id, observations_mission="   ")
    retain(http, bank_id, "The user likes oolong tea.")
    (request,) = consolidation_requests(llm)
    assert DEFAULT_RULES in request.system_prompt


def test_the_observation_cap_refuses_creates_past_it(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    many = ["The user likes tea", "The user plays chess", "The user lives in Oslo"]
    script.decide = lambda request: {"creates": [{"text": text, "evidence": [{"fact": "F1", "quote": "user"}]}
                                                 for text in many]}
    configure(http, bank_id, max_observations_per_scope=2, consolidation_strategies=[
        {"scopes": [{"tags": ["team:*"]}], "max_observations_per_scope": 1}])
    retain(http, bank_id, "The user talked about their life.")
    retain(http, bank_id, "The team talked about the user.", tags=["team:exec"])
    counts: dict[tuple[str, ...], int] = {}
    for observation in observations(http, bank_id):
        counts[tuple(observation["tags"])] = counts.get(tuple(observation["tags"]), 0) + 1
    assert counts == {(): 2, ("team:exec",): 1}, "the bank cap, and the strategy's own cap for its scope"
    script.decide = lambda request: {"creates": [{"text": "The user owns a red bicycle",
                                                  "evidence": [{"fact": "F1", "quote": "user"}]}]}
    retain(http, bank_id, "The user mentioned a bicycle.")
    assert len([o for o in observations(http, bank_id) if not o["tags"]]) == 2, "a full scope stays full"
    assert all(f["consolidated_at"] for f in facts(http, bank_id).values()), "a refused create loses no fact"


SWIMS = ["The user swims on Mondays.", "The user swims on Thursdays.", "The user swims in the sea in summer."]


@pytest.mark.parametrize("budget", ["default", "per_observation", "none"])
def test_source_fact_budgets_bound_what_consolidation_shows(http: httpx.Client, llm: ScriptedLLM, bank_id: str,
                                                            budget: str) -> None:
    from engram.models.tokens import count_tokens_batch

    newest_tokens = count_tokens_batch([SWIMS[1]])[0]
    updates = {"default": {},
               "per_observation": {"consolidation_source_facts_max_tokens_per_observation": newest_tokens},
               "none": {"consolidation_source_facts_max_tokens": 0}}[budget]
    if updates:
        configure(http, bank_id, **updates)
    script = PolicyScript(llm)
    script.decide = lambda request: (
        {"updates": [{"observation": "O1", "text": "The user swims every week",
                      "evidence": [{"fact": "F1", "quote": "swims"}]}]}
        if observation_handle(request, "swims") else
        {"creates": [{"text": "The user swims every week", "evidence": [{"fact": "F1", "quote": "swims"}]}]}
    )
    for text in SWIMS:
        retain(http, bank_id, text)
    last = consolidation_requests(llm)[-1].user_text
    shown = [line.split("source: ", 1)[1] for line in last.splitlines() if line.startswith("    - source: ")]
    expected = {"default": [SWIMS[1], SWIMS[0]], "per_observation": [SWIMS[1]], "none": []}[budget]
    assert shown == expected, "newest source first, within the budget"


# --- targeted consolidation ----------------------------------------------------------------------------

TAGGED = {
    "Alice likes hiking.": ["user:alice"],
    "Alice leads the platform team.": ["user:alice", "team:eng"],
    "Bob likes chess.": ["user:bob"],
    "Carol likes sailing.": ["user:carol"],
    "Engineering ships on Fridays.": ["team:engineering"],
    "The office has a rooftop garden.": [],
}


def test_observation_scopes_on_consolidate_pick_the_facts(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = create_each_fact()
    configure(http, bank_id, enable_auto_consolidation=False)
    for text, tags in TAGGED.items():
        retain(http, bank_id, text, tags=tags)

    def done() -> set[str]:
        return {text for text, fact in facts(http, bank_id).items() if fact["consolidated_at"]}

    assert done() == set()
    http.post(f"/v1/default/banks/{bank_id}/consolidate",
              json={"observation_scopes": [["user:alice"]]}).raise_for_status()
    settle(http, bank_id)
    assert done() == {"Alice likes hiking.", "Alice leads the platform team."}
    http.post(f"/v1/default/banks/{bank_id}/consolidate",
              json={"observation_scopes": [["user:bob"], ["team:engineering"]]}).raise_for_status()
    settle(http, bank_id)
    assert done() == {"Alice likes hiking.", "Alice leads the platform team.", "Bob likes chess.",
                      "Engineering ships on Fridays."}
    http.post(f"/v1/default/banks/{bank_id}/consolidate").raise_for_status()
    settle(http, bank_id)
    assert done() == set(TAGGED)


def test_one_consolidation_job_waits_per_bank(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = lambda request: Reply.delay(1.5, then=Reply.json(create_each_fact()(request)))
    configure(http, bank_id, enable_auto_consolidation=False)
    retain(http, bank_id, "The user collects stamps.")
    url = f"/v1/default/banks/{bank_id}/consolidate"
    running = http.post(url).json()
    wait_for(lambda: consolidation_requests(llm), "the first job to reach the LLM")
    waiting = http.post(url).json()
    again = http.post(url).json()
    assert not waiting["deduplicated"] and waiting["operation_id"] != running["operation_id"], (
        "a running job is not reused: facts retained since would be missed")
    assert again == {"operation_id": waiting["operation_id"], "deduplicated": True}
    settle(http, bank_id)
    assert len(consolidation_requests(llm)) == 1 and len(observations(http, bank_id)) == 1


# --- lifecycle -------------------------------------------------------------------------------------------


def test_after_a_deletion_the_remaining_sources_are_reconsolidated(http: httpx.Client, llm: ScriptedLLM,
                                                                   bank_id: str) -> None:
    script = PolicyScript(llm)

    def decide(request: ChatRequest) -> dict:
        existing = observation_handle(request, "runs")
        text = "The user runs " + ("before work" if fact_line(request, "The user runs before work.") else "at 6am")
        if existing:
            return {"updates": [{"observation": existing, "text": text, "evidence": [{"fact": "F1", "quote": "runs"}]}]}
        return {"creates": [{"text": text, "evidence": [{"fact": "F1", "quote": "runs"}]}]}

    script.decide = decide
    retain(http, bank_id, "The user runs at 6am.", document_id="a")
    script.decide = lambda request: {"updates": [{"observation": observation_handle(request, "runs"),
                                                  "text": "The user runs at 6am, before work",
                                                  "evidence": [{"fact": "F1", "quote": "runs"}]}]}
    retain(http, bank_id, "The user runs before work.", document_id="b")
    (observation,) = observations(http, bank_id)
    assert observation["proof_count"] == 2

    script.decide = decide
    seen = len(llm.requests)
    http.delete(f"/v1/default/banks/{bank_id}/documents/a").raise_for_status()
    settle(http, bank_id)
    (request,) = consolidation_requests(llm, seen)
    assert fact_line(request, "The user runs before work.") == "F1", "the remaining source is consolidated again"
    assert "The user runs at 6am, before work" in request.user_text, "next to the observation it fed"
    (kept,) = observations(http, bank_id)
    assert kept["id"] == observation["id"] and kept["text"] == "The user runs before work"
    assert kept["proof_count"] == 1


def test_clearing_a_memorys_observations_resets_their_other_sources(http: httpx.Client, llm: ScriptedLLM,
                                                                    bank_id: str) -> None:
    script = PolicyScript(llm)
    coffee, espresso = "The user drinks coffee daily.", "The user drinks espresso after lunch."

    def both(request: ChatRequest) -> dict:
        handles = [fact_line(request, coffee), fact_line(request, espresso)]
        return {"creates": [{"text": "The user drinks coffee",
                             "evidence": [{"fact": h, "quote": "drinks"} for h in handles if h]}]}

    script.decide = both
    configure(http, bank_id, enable_auto_consolidation=False)
    retain(http, bank_id, coffee)
    retain(http, bank_id, espresso)
    http.post(f"/v1/default/banks/{bank_id}/consolidate").raise_for_status()
    settle(http, bank_id)
    (before,) = observations(http, bank_id)
    assert before["proof_count"] == 2

    seen = len(llm.requests)
    cleared = http.delete(f"/v1/default/banks/{bank_id}/memories/{facts(http, bank_id)[coffee]['id']}/observations")
    assert cleared.json() == {"deleted_count": 1}
    settle(http, bank_id)
    requests = consolidation_requests(llm, seen)
    assert requests, "the clear queues a consolidation even with auto-consolidation off"
    shown = "\n".join(r.user_text for r in requests)
    assert coffee in shown and espresso in shown, "the other source of the cleared observation is reset too"
    (after,) = observations(http, bank_id)
    assert after["id"] != before["id"] and after["proof_count"] == 2


# --- what is stored ------------------------------------------------------------------------------------


def test_evidence_quotes_are_the_facts_own_words(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    script = PolicyScript(llm)
    fact = "The user built another React dashboard and enjoyed it."
    script.decide = lambda request: {"creates": [{"text": "The user enjoys building React dashboards",
                                                  "evidence": [{"fact": "F1", "quote": "ENJOYED   it"},
                                                               {"fact": "F1", "quote": "words not in the fact"}]}]}
    retain(http, bank_id, fact)
    (observation,) = observations(http, bank_id)
    detail = http.get(f"/v1/default/banks/{bank_id}/memories/{observation['id']}").json()
    assert sorted(e["quote"] for e in detail["evidence"]) == sorted(["enjoyed it", fact])
    assert set(facts(http, bank_id)) == {fact}, "the raw fact itself is never rewritten"


def test_a_delete_is_refined_into_the_new_belief_or_refused(http: httpx.Client, llm: ScriptedLLM,
                                                            bank_id: str) -> None:
    script = PolicyScript(llm)
    script.decide = lambda request: {"creates": [{"text": "The user lives in Paris",
                                                  "evidence": [{"fact": "F1", "quote": "Paris"}]}]}
    retain(http, bank_id, "The user lives in Paris.")
    (paris,) = observations(http, bank_id)
    history_url = f"/v1/default/banks/{bank_id}/memories/{paris['id']}/history"
    created_at = http.get(history_url).json()["current"]["updated_at"]

    # A plain delete with nothing to carry the belief on: refused, the observation stays.
    script.decide = lambda request: {"deletes": [{"observation": observation_handle(request, "Paris")}]}
    retain(http, bank_id, "The user said hello.")
    assert [o["id"] for o in observations(http, bank_id)] == [paris["id"]]

    # Delete plus a create for the changed state: the same observation is refined, with its history.
    script.decide = lambda request: {
        "deletes": [{"observation": observation_handle(request, "Paris"), "reason": "moved"}],
        "creates": [{"text": "The user lived in Paris and moved to Berlin in 2023",
                     "evidence": [{"fact": "F1", "quote": "moved to Berlin"}]}],
    }
    retain(http, bank_id, "The user moved to Berlin in 2023.")
    (moved,) = observations(http, bank_id)
    assert moved["id"] == paris["id"] and moved["text"] == "The user lived in Paris and moved to Berlin in 2023"
    assert moved["proof_count"] == 2
    refined = http.get(history_url).json()
    assert [h["text"] for h in refined["history"]] == ["The user lives in Paris"]
    assert refined["current"]["updated_at"] > created_at, "the observation records when it was last updated"
