"""Entity kinds and entity observations through a real server.

Kinds (`metadata.entity_type`): from the LLM (normalised), from a caller's `type`, guessed offline
from cues, and filterable in `GET …/entities`. Observations (entities.md): after a retain, the top 5
entities mentioned by its facts that have at least 5 facts get a summary regenerated in the
background from their 50 most recent facts, replacing the previous one, stale once facts change;
none without an LLM. The scripted LLM writes the summary text; what is asserted is the engine's
choice of entities and facts, the replacement and the staleness."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from engram.entity_observations.prompt import SYSTEM
from tests.conftest import RunningServer, start_server
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM
from tests.support.waiting import settle

TAGGED = re.compile(r"^(?P<text>.*?)\s*\[(?P<names>[^\]]*)\]\s*$", re.DOTALL)


class Script:
    """Extraction answers the item's text as one fact whose entities are the names in its trailing
    [brackets]; each summary request gets a numbered text; consolidation changes nothing."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, request: ChatRequest) -> Any:
        if request.schema_name == "EntitySummary":
            self.summaries += 1
            return {"text": f"Summary number {self.summaries}."}
        if request.schema_name == "ConsolidationActions":
            return {"creates": [], "updates": [], "deletes": []}
        text = request.user_text.split("Text:\n", 1)[1].strip()
        match = TAGGED.match(text)
        names = [n.strip() for n in match["names"].split(",") if n.strip()] if match else []
        return {"facts": [{"what": match["text"] if match else text, "entities": names}]}


@pytest.fixture
def script(llm: ScriptedLLM) -> Script:
    llm.handler = Script()
    return llm.handler


def retain(http: httpx.Client, bank_id: str, contents: list[str], **item: Any) -> None:
    items = [{"content": content, **item} for content in contents]
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).raise_for_status()


def retain_settled(http: httpx.Client, bank_id: str, contents: list[str]) -> None:
    """Retain, then wait for the background work it queued (summaries, consolidation)."""
    retain(http, bank_id, contents)
    settle(http, bank_id)


def entity_ids(http: httpx.Client, bank_id: str) -> dict[str, str]:
    items = http.get(f"/v1/default/banks/{bank_id}/entities", params={"limit": 1000}).json()["items"]
    return {e["canonical_name"]: e["id"] for e in items}


def own_observations(http: httpx.Client, bank_id: str, name: str) -> list[dict[str, Any]]:
    detail = http.get(f"/v1/default/banks/{bank_id}/entities/{entity_ids(http, bank_id)[name]}").json()
    return [o for o in detail["observations"] if o.get("source") == "entity"]


def summary_requests(llm: ScriptedLLM, since: int = 0) -> list[ChatRequest]:
    return [r for r in llm.requests[since:] if r.schema_name == "EntitySummary"]


def summarised_entity(request: ChatRequest) -> str:
    return request.user_text.split("\n", 1)[0].removeprefix("Entity: ")


def summary_operations(http: httpx.Client, bank_id: str) -> list[dict[str, Any]]:
    listed = http.get(f"/v1/default/banks/{bank_id}/operations", params={"limit": 100}).json()
    return [op for op in listed["operations"] if op["operation_type"] == "entity_observations"]


# --- kinds ---------------------------------------------------------------------------------------


def test_llm_kinds_are_stored_normalised_and_filterable(
    llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = lambda request: {"facts": [{
        "what": "Alice works at Google in Mountain View. She specializes in TensorFlow.",
        "entities": [{"name": "Alice", "type": "person"}, {"name": "Google", "type": "organization"},
                     {"name": "Mountain View", "type": "location"}, {"name": "TensorFlow", "type": "product"},
                     {"name": "career growth", "type": "concept"}, "Brightwater"],
    }]} if request.schema_name == "ExtractionOutput" else {"creates": []}
    with llm_server.client() as http:
        retain(http, bank_id, ["Alice works at Google in Mountain View. She specializes in TensorFlow."],
               entities=[{"text": "Acme Corp", "type": "company"}, {"text": "Zed", "type": "spaceship"}])
        sent = next(r for r in llm.requests if r.schema_name == "ExtractionOutput").schema
        assert sent["$defs"]["StrictEntityMention"]["properties"]["type"]["enum"] == [
            "person", "organisation", "place", "product", "concept"]

        items = http.get(f"/v1/default/banks/{bank_id}/entities").json()["items"]
        kinds = {e["canonical_name"]: e["metadata"]["entity_type"] for e in items}
        assert kinds == {"Alice": "person", "Google": "organisation", "Mountain View": "place",
                         "TensorFlow": "product", "career growth": "concept", "Brightwater": None,
                         "Acme Corp": "organisation", "Zed": None}
        detail = http.get(f"/v1/default/banks/{bank_id}/entities/{items[0]['id']}").json()
        assert detail["metadata"]["entity_type"] == kinds[detail["canonical_name"]]

        organisations = http.get(f"/v1/default/banks/{bank_id}/entities", params={"entity_type": "organisation"})
        assert sorted(e["canonical_name"] for e in organisations.json()["items"]) == ["Acme Corp", "Google"]
        assert organisations.json()["total"] == 2
        wrong = http.get(f"/v1/default/banks/{bank_id}/entities", params={"entity_type": "planet"})
        assert wrong.status_code == 400 and wrong.json()["field"] == "entity_type"


def test_offline_kinds_are_guessed_from_cues(server: RunningServer, bank_id: str) -> None:
    with server.client() as http:
        retain(http, bank_id, ["Caroline: I met Dr. Patel at Brightwater Labs.\n"
                               "Melanie: Nice! Then you moved to Lisbon?"])
        items = http.get(f"/v1/default/banks/{bank_id}/entities").json()["items"]
        kinds = {e["canonical_name"]: e["metadata"]["entity_type"] for e in items}
        people = http.get(f"/v1/default/banks/{bank_id}/entities", params={"entity_type": "person"}).json()
    assert kinds["Caroline"] == kinds["Melanie"] == "person", "speakers are people"
    assert kinds["Dr. Patel"] == "person"
    assert kinds["Brightwater Labs"] == "organisation"
    assert kinds["Lisbon"] == "place"
    assert {e["canonical_name"] for e in people["items"]} == {"Caroline", "Melanie", "Dr. Patel"}


# --- entity observations -----------------------------------------------------------------------


def test_only_the_batchs_top_five_with_five_facts_are_summarised(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    with llm_server.client() as http:
        retain_settled(http, bank_id, [f"Otto fixed boiler {n}. [Otto]" for n in range(6)])
        assert [summarised_entity(r) for r in summary_requests(llm)] == ["Otto"]
        first = len(llm.requests)

        # Mentions in this batch: Ana 8, Ben 7, Cy 6, Dee 4, Eve 3, Otto 2 (but 8 facts in all).
        facts = []
        for n in range(8):
            names = [name for name, count in (("Ana", 8), ("Ben", 7), ("Cy", 6), ("Dee", 4), ("Eve", 3),
                                              ("Otto", 2)) if n < count]
            facts.append(f"Team note {n}. [{', '.join(names)}]")
        retain_settled(http, bank_id, facts)
        summarised = sorted(summarised_entity(r) for r in summary_requests(llm, first))
        assert summarised == ["Ana", "Ben", "Cy"], "the batch's top 5 (not Otto); of those, ≥ 5 facts (not Dee, Eve)"
        assert own_observations(http, bank_id, "Otto")[0]["text"] == "Summary number 1."
        assert own_observations(http, bank_id, "Dee") == []
        assert all(op["status"] == "completed" for op in summary_operations(http, bank_id))


class HeldSummaries:
    """The script, but each summary call is held until `expected` calls are in flight (or `seconds`
    have passed), and the calls held at once are counted; a summary names the entity it was asked
    about."""

    def __init__(self, script: Script, expected: int, seconds: float) -> None:
        self.script, self.expected, self.seconds = script, expected, seconds
        self.now = self.peak = 0
        self._changed = threading.Condition()

    def __call__(self, request: ChatRequest) -> Any:
        if request.schema_name != "EntitySummary":
            return self.script(request)
        with self._changed:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self.peak >= self.expected, self.seconds)
        with self._changed:
            self.now -= 1
        return {"text": f"All about {summarised_entity(request)}."}


def test_a_jobs_entities_are_summarised_at_once(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    """Each entity's summary is a call of its own: the job sends them together (until session 36 one
    after another, a model answer's wait each)."""
    names = ["Ana", "Ben", "Cy", "Dee", "Eve"]
    held = llm.handler = HeldSummaries(script, len(names), 2.0)
    with llm_server.client() as http:
        retain_settled(http, bank_id, [f"{name} sorted crate {n}. [{name}]" for name in names for n in range(5)])
        assert held.peak == len(names), f"{held.peak} summary calls at once"
        assert {name: [o["text"] for o in own_observations(http, bank_id, name)] for name in names} == {
            name: [f"All about {name}."] for name in names}, "each entity's own answer, under it"
        (job,) = summary_operations(http, bank_id)
        assert job["status"] == "completed"


def test_a_failed_summary_cancels_the_jobs_calls_still_out(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    """Cy's call fails once Ana's and Ben's are in flight, each held a second: the job fails then, and
    their calls are cancelled, not written by a job already reported failed."""
    in_flight = threading.Semaphore(0)

    def answer(request: ChatRequest) -> Any:
        if request.schema_name != "EntitySummary":
            return script(request)
        if summarised_entity(request) == "Cy":
            for _ in range(2):
                in_flight.acquire(timeout=10)
            return Reply.error(500)
        in_flight.release()
        time.sleep(1.0)
        return {"text": f"All about {summarised_entity(request)}."}

    llm.handler = answer
    names = ["Ana", "Ben", "Cy"]
    with llm_server.client() as http:
        retain_settled(http, bank_id, [f"{name} sorted crate {n}. [{name}]" for name in names for n in range(5)])
        (job,) = summary_operations(http, bank_id)
        assert job["status"] == "failed"
        time.sleep(1.5)  # past the held calls' answers
        assert {name: own_observations(http, bank_id, name) for name in names} == {name: [] for name in names}
    assert sorted(summarised_entity(r) for r in summary_requests(llm)) == names, "all three were asked at once"


def test_a_summary_is_built_from_the_50_most_recent_facts(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with llm_server.client() as http:
        # A bank with a strong disposition: observations stay objective, it never reaches their prompt.
        http.put(f"/v1/default/banks/{bank_id}", json={"disposition_skepticism": 5, "disposition_empathy": 1}
                 ).raise_for_status()
        items = [{"content": f"Priya logged run number {n:02d}. [Priya]",
                  "timestamp": (start + timedelta(days=n)).isoformat()} for n in range(55)]
        items.reverse()  # stored newest first: "recent" is when a fact was said, not stored
        http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).raise_for_status()
        settle(http, bank_id)
    (request,) = summary_requests(llm)
    runs = [int(n) for n in re.findall(r"run number (\d+)", request.user_text)]
    assert sorted(runs) == list(range(5, 55)), "the 50 most recent, none of the 5 oldest"
    assert runs == sorted(runs), "shown oldest first, so changes read in order"
    assert "2024-02-24" in request.user_text, "each fact with the date it was said"
    assert request.system_prompt == SYSTEM and "isposition" not in request.user_text


def test_a_summary_is_replaced_goes_stale_and_shows_in_recall(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    with llm_server.client() as http:
        retain_settled(http, bank_id, [f"Kofi planted tree {n} in the orchard. [Kofi]" for n in range(5)])
        (first,) = own_observations(http, bank_id, "Kofi")
        assert first["text"] == "Summary number 1." and first["stale"] is False

        # Observations off for the bank: a new fact arrives and nothing regenerates, so it is stale.
        http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_observations": False}}
                   ).raise_for_status()
        retain_settled(http, bank_id, ["Kofi pruned the orchard's oldest tree. [Kofi]"])
        (stale,) = own_observations(http, bank_id, "Kofi")
        assert stale["text"] == "Summary number 1." and stale["stale"] is True
        recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall",
                             json={"query": "What did Kofi do in the orchard?", "include": {"entities": {}}}).json()
        assert recalled["entities"]["Kofi"]["observations"][0] == {
            "text": "Summary number 1.", "mentioned_at": stale["mentioned_at"], "stale": True}

        http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_observations": True}}
                   ).raise_for_status()
        retain_settled(http, bank_id, ["Kofi harvested the orchard's first mangoes. [Kofi]"])
        (fresh,) = own_observations(http, bank_id, "Kofi")  # replaced, not one more
        assert fresh["text"] == "Summary number 2." and fresh["stale"] is False
        (request,) = summary_requests(llm)[1:]
        assert len(re.findall(r"^- \[", request.user_text, re.MULTILINE)) == 7, "all 7 facts, both new ones too"


@pytest.mark.parametrize("failure", [Reply.error(500), Reply.json({"text": "  \n "})], ids=["error", "blank"])
def test_a_failed_summary_is_a_failed_operation_and_keeps_the_previous_one(
    llm_server: RunningServer, llm: ScriptedLLM, script: Script, bank_id: str, failure: Reply
) -> None:
    with llm_server.client() as http:
        retain_settled(http, bank_id, [f"Ines wrote chapter {n}. [Ines]" for n in range(5)])
        llm.handler = lambda request: failure if request.schema_name == "EntitySummary" else script(request)
        retain_settled(http, bank_id, ["Ines finished the final chapter. [Ines]"])
        statuses = [op["status"] for op in summary_operations(http, bank_id)]
        assert sorted(statuses) == ["completed", "failed"]
        (kept,) = own_observations(http, bank_id, "Ines")
        assert kept["text"] == "Summary number 1." and kept["stale"] is True


def test_without_an_llm_no_entity_gets_observations(server: RunningServer, bank_id: str) -> None:
    with server.client() as http:
        retain_settled(http, bank_id, [f"Zephyrine repaired lighthouse number {n}." for n in range(6)])
        assert summary_operations(http, bank_id) == []
        assert own_observations(http, bank_id, "Zephyrine") == []


def test_retains_while_a_summary_job_waits_add_their_entities_to_it(
    isolated_dsn: str, llm: ScriptedLLM, script: Script, bank_id: str
) -> None:
    env = {**llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "HINDSIGHT_API_ENABLE_AUTO_CONSOLIDATION": "false"}
    queueing = start_server(isolated_dsn, {**env, "ENGRAM_WORKER_ENABLED": "false"}, name="summaries-queued")
    try:
        with queueing.client() as http:
            retain(http, bank_id, [f"Ana tuned piano {n}. [Ana]" for n in range(5)])
            retain(http, bank_id, [f"Ben tuned organ {n}. [Ben]" for n in range(5)])
            retain(http, bank_id, ["Ana and Ben tuned the harpsichord. [Ana, Ben]"])
            (job,) = summary_operations(http, bank_id)
            assert job["status"] == "pending"
    finally:
        queueing.stop()
    working = start_server(isolated_dsn, env, name="summaries-worker")
    try:
        with working.client() as http:
            settle(http, bank_id)
            assert [op["status"] for op in summary_operations(http, bank_id)] == ["completed"]
    finally:
        working.stop()
    assert sorted(summarised_entity(r) for r in summary_requests(llm)) == ["Ana", "Ben"], "each entity once"
