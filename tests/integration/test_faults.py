"""Fault injection, the LLM: it times out, answers 500, answers malformed JSON, or cites facts and
observations it was never shown, on async and sync retains and on consolidation.

After each fault: the failure is visible (a failed operation whose reason names the cause, a 502, or
facts marked failed), nothing is half-written, a retry succeeds once the model is healthy, every fact
is stored once and the bank's stats agree with its memory list. PostgreSQL restarts and killed workers
are in test_faults_restarts.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, separate_database, start_server
from tests.support.faults import (
    API,
    Model,
    assert_nothing_lost_or_doubled,
    assert_stats_consistent,
    consolidation_id,
    facts,
    memories,
    new_facts,
    observations,
    one_observation_per_fact,
    operations,
    retain,
    retain_async,
    retry,
    settle,
    wait_terminal,
)
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM

FAULTS: dict[str, tuple[Callable[[ChatRequest], Reply], str]] = {
    # The server's timeout is 1 s: the answer comes too late (and is valid, so only the timing is wrong).
    "timeout": (lambda request: Reply.delay(2.5, then=Reply.json({"facts": []})), "timed out"),
    "http_500": (lambda request: Reply.error(500, "the model is overloaded"), "HTTP 500"),
    "malformed_json": (lambda request: Reply.text('{"facts": [{"what": "unterminated'), "not valid JSON"),
}


@pytest.fixture(scope="module")
def fault_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    """A server whose LLM calls give up after 1 s with no retry, so every fault fails at once."""
    env = {**scripted_llm.settings_env(), "ENGRAM_LLM_TIMEOUT": "1", "ENGRAM_LLM_MAX_RETRIES": "0"}
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, env, name="faults")
        yield running
        running.stop()


@pytest.fixture
def http(fault_server: RunningServer) -> Iterator[httpx.Client]:
    with fault_server.client() as client:
        yield client


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_retain_whose_llm_fails_fails_visibly_and_its_retry_stores_it_once(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str, fault: str
) -> None:
    model = Model(llm)
    reply, reason = FAULTS[fault]
    model.retain_fault = reply
    text = "Mirela restored the clock tower in Brasov.\nTeodor rang its bell at noon."
    operation_id = retain_async(http, bank_id, text)

    failed = wait_terminal(http, bank_id, operation_id)
    assert failed["status"] == "failed"
    assert reason in failed["error_message"] and "openai" in failed["error_message"], failed["error_message"]
    assert [op["id"] for op in operations(http, bank_id, "retain", "failed")] == [operation_id]
    assert memories(http, bank_id) == [], "a failed retain writes nothing"
    stats = assert_stats_consistent(http, bank_id)
    assert (stats["total_nodes"], stats["total_documents"], stats["failed_operations"]) == (0, 0, 1)
    assert http.get(f"{API}/{bank_id}/entities").json()["total"] == 0

    model.healthy()
    done = retry(http, bank_id, operation_id)
    assert done["retry_count"] == 1 and done["result_metadata"]["facts"] == 2
    assert facts(http, bank_id) == ["Mirela restored the clock tower in Brasov.", "Teodor rang its bell at noon."]
    stats = settle(http, bank_id)
    assert stats["failed_operations"] == 0 and stats["total_documents"] == 1
    assert_nothing_lost_or_doubled(http, bank_id)


def test_a_sync_retain_whose_llm_fails_answers_an_error_and_writes_nothing(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    assert http.put(f"{API}/{bank_id}", json={}).status_code == 200
    text = "Ilinca planted tulips along the canal."
    for fault in sorted(FAULTS):
        model.retain_fault, reason = FAULTS[fault]
        response = retain(http, bank_id, text)
        assert response.status_code == 502, response.text
        assert reason in response.json()["detail"]
    assert memories(http, bank_id) == []
    model.healthy()
    assert retain(http, bank_id, text).status_code == 200
    assert facts(http, bank_id) == [text]
    settle(http, bank_id)
    assert_stats_consistent(http, bank_id)


def test_extracted_facts_citing_unknown_facts_keep_only_the_valid_causes(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    model.retain_fault = lambda request: Reply.json({"facts": [
        {"what": "The river flooded the lower town.", "causal_relations": [{"caused_by": 7}]},
        {"what": "The bakery closed for a week.", "causal_relations": [{"caused_by": 0}, {"caused_by": 2}]},
        {"what": "The mayor ordered new levees.", "causal_relations": [{"caused_by": -1}, {"caused_by": 99}]},
    ]})
    operation_id = retain_async(http, bank_id, "Flood report.")
    done = wait_terminal(http, bank_id, operation_id)
    assert done["status"] == "completed", done["error_message"]
    assert len(facts(http, bank_id)) == 3
    stats = settle(http, bank_id)
    assert stats["links_by_link_type"].get("causal", 0) == 1, "only 'bakery ← river' points at an earlier fact"
    assert_stats_consistent(http, bank_id)


@pytest.mark.parametrize("fault", ["timeout", "http_500"])
def test_a_consolidation_whose_llm_is_down_fails_whole_and_its_retry_completes(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str, fault: str
) -> None:
    model = Model(llm)
    reply, reason = FAULTS[fault]
    model.consolidation_fault = reply
    lines = ["Sorin keeps bees on the roof.", "Sorin sells honey at the Saturday market.", "Dana fixes bikes."]
    assert retain(http, bank_id, "\n".join(lines)).status_code == 200
    job = consolidation_id(http, bank_id)
    failed = wait_terminal(http, bank_id, job)
    assert failed["status"] == "failed"
    assert reason in failed["error_message"], failed["error_message"]
    assert observations(http, bank_id) == [], "no observation from a failed job"
    stats = assert_stats_consistent(http, bank_id)
    assert (stats["pending_consolidation"], stats["failed_consolidation"]) == (3, 0), "facts wait, not failed"

    model.healthy()
    done = retry(http, bank_id, job)
    assert done["result_metadata"]["observations_created"] == 3
    assert facts(http, bank_id) == sorted(lines)
    stats = assert_nothing_lost_or_doubled(http, bank_id)
    assert (stats["pending_consolidation"], stats["failed_consolidation"], stats["failed_operations"]) == (0, 0, 0)


def test_a_consolidation_failing_midway_keeps_its_committed_batches_and_the_retry_does_the_rest(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """Batches of 8 commit one by one: after the second call fails, the first batch's observations stay,
    and the retry consolidates only what is left: no observation is lost or written twice."""
    model = Model(llm)
    model.consolidation_fault = lambda request: (
        Reply.error(500, "the model crashed") if model.calls["ConsolidationActions"] > 1 else None)
    lines = [f"Visitor {n} signed the guest book of the Piatra lighthouse." for n in range(10)]
    assert retain(http, bank_id, "\n".join(lines)).status_code == 200
    job = consolidation_id(http, bank_id)
    assert wait_terminal(http, bank_id, job)["status"] == "failed"
    stats = assert_stats_consistent(http, bank_id)
    assert stats["total_observations"] == 8 and stats["pending_consolidation"] == 2

    model.healthy()
    retry(http, bank_id, job)
    assert len(observations(http, bank_id)) == 10
    assert assert_nothing_lost_or_doubled(http, bank_id)["pending_consolidation"] == 0


def test_a_consolidation_answer_that_never_parses_marks_its_facts_failed_and_they_can_be_redone(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    model.consolidation_fault = lambda request: Reply.text("Sure! Here are the observations: none")
    lines = ["Anca paints ceramic tiles.", "Anca teaches a pottery class on Tuesdays.", "Radu drives the tram."]
    assert retain(http, bank_id, "\n".join(lines)).status_code == 200
    done = wait_terminal(http, bank_id, consolidation_id(http, bank_id))
    assert done["status"] == "completed", "bad answers fail facts, not the job"
    assert done["result_metadata"]["facts_failed"] == 3
    assert done["result_metadata"]["batches_halved"] == 2, "3 facts → 1 + 2 → 1 + 1"
    assert observations(http, bank_id) == []
    stats = assert_stats_consistent(http, bank_id)
    assert (stats["pending_consolidation"], stats["failed_consolidation"]) == (0, 3)
    failed = memories(http, bank_id, type="world", consolidation_state="failed")
    detail = http.get(f"{API}/{bank_id}/memories/{failed[0]['id']}").json()
    assert "not valid JSON" in detail["consolidation_error"], detail

    model.healthy()
    for fact in failed:  # the way to redo one fact: clear its observations, which re-queues it
        assert http.delete(f"{API}/{bank_id}/memories/{fact['id']}/observations").status_code == 200
    settle(http, bank_id)
    stats = assert_nothing_lost_or_doubled(http, bank_id)
    assert (stats["pending_consolidation"], stats["failed_consolidation"]) == (0, 0)


def test_consolidation_actions_citing_unknown_facts_or_observations_are_dropped(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    model = Model(llm)
    cited: list[str] = []

    def hallucinating(request: ChatRequest) -> dict[str, Any]:
        (first, first_text), *_ = new_facts(request)
        cited.append(first_text)
        return {
            "creates": [
                {"text": "A belief about Luca", "evidence": [{"fact": first, "quote": "words not in the fact"}]},
                {"text": "A belief resting on nothing shown", "evidence": [{"fact": "F99", "quote": "x"}]},
                {"text": "A belief with no evidence at all", "evidence": []},
            ],
            "updates": [{"observation": "O7", "text": "Rewrite of an unseen observation",
                         "evidence": [{"fact": first, "quote": first_text}]}],
            "deletes": [{"observation": "O3", "merged_into": "O1"}],
        }

    model.consolidate = hallucinating
    lines = ["Luca collects vinyl records.", "Luca lives above a bakery."]
    assert retain(http, bank_id, "\n".join(lines)).status_code == 200
    done = wait_terminal(http, bank_id, consolidation_id(http, bank_id))
    assert done["status"] == "completed", done["error_message"]
    assert done["result_metadata"]["actions_dropped"] == 4
    (kept,) = observations(http, bank_id)
    assert kept["text"] == "A belief about Luca"
    detail = http.get(f"{API}/{bank_id}/memories/{kept['id']}").json()
    assert [e["quote"] for e in detail["evidence"]] == cited, "a false quote is replaced by the fact's text"
    stats = assert_stats_consistent(http, bank_id)
    assert (stats["pending_consolidation"], stats["failed_consolidation"]) == (0, 0), "both facts are done"


def test_retains_arriving_while_a_consolidation_runs_never_consolidate_a_fact_twice(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    """Each retain queues a consolidation while the previous one is still running: they take turns."""
    model = Model(llm)
    model.consolidation_fault = lambda request: Reply.delay(0.4, then=Reply.json(one_observation_per_fact(request)))
    for n in range(5):
        assert retain(http, bank_id, f"Guest {n} checked into the Sinaia mountain hut.").status_code == 200
    settle(http, bank_id)
    assert len(observations(http, bank_id)) == 5
    assert_nothing_lost_or_doubled(http, bank_id)
