"""Entity resolution rules through a real server: an exact name is scored like any candidate (two
Jordans in unrelated contexts, weeks apart, are two entities), identifiers differing in a digit are
never one entity, and label entities are never fuzzy candidates — not after their group left the
config, and not when a free-form entity carried the label's name first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import RunningServer, _admin, scripted_server
from tests.support.scripted_llm import ScriptedLLM
from tests.support.waiting import wait_for

PRIORITY = {"key": "priority", "type": "value", "values": [{"value": "urgent"}, {"value": "low"}]}
CUSTOMER = {"key": "customer", "type": "map", "fields": {"name": {"type": "text"}}}


@pytest.fixture(scope="module")
def llm_db(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    """A scripted-LLM server on a database of its own, so tests can age entities in SQL."""
    with scripted_server(pg_dsn, scripted_llm, "entity-rules",
                         HINDSIGHT_API_ENABLE_AUTO_CONSOLIDATION="false") as running:
        yield running


@pytest.fixture
def http(llm_db: tuple[RunningServer, str]) -> Iterator[httpx.Client]:
    with llm_db[0].client() as client:
        yield client


def retain_fact(http: httpx.Client, llm: ScriptedLLM, bank_id: str, fact: dict[str, Any],
                entities: list[str] | None = None) -> None:
    """One retain whose extraction answers exactly `fact`; `entities` are caller-supplied names."""
    llm.handler = lambda request: {"facts": [fact]}
    item: dict[str, Any] = {"content": fact["what"]}
    if entities:
        item["entities"] = [{"text": name} for name in entities]
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [item]}).raise_for_status()


def entities(http: httpx.Client, bank_id: str) -> list[dict[str, Any]]:
    return http.get(f"/v1/default/banks/{bank_id}/entities", params={"limit": 1000}).json()["items"]


def by_name(http: httpx.Client, bank_id: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for entity in entities(http, bank_id):
        found.setdefault(entity["canonical_name"], []).append(entity)
    return found


def age_entities(dsn: str, bank_id: str, days: int) -> None:
    _admin(dsn, f"UPDATE entities SET last_seen = last_seen - interval '{days} days', "
                f"first_seen = first_seen - interval '{days} days' WHERE bank_id = '{bank_id}'")


def configure(http: httpx.Client, bank_id: str, labels: list[dict[str, Any]]) -> None:
    response = http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"entity_labels": labels}})
    assert response.status_code == 200, response.text


def test_two_jordans_in_unrelated_contexts_weeks_apart_are_two_entities(
    http: httpx.Client, llm: ScriptedLLM, llm_db: tuple[RunningServer, str], bank_id: str
) -> None:
    retain_fact(http, llm, bank_id, {"what": "Jordan bakes sourdough at Le Fournil in Paris.",
                                     "entities": ["Jordan", "Le Fournil", "Paris"]})
    age_entities(llm_db[1], bank_id, 60)
    retain_fact(http, llm, bank_id, {"what": "Jordan joined Google to work on TensorFlow.",
                                     "entities": ["Jordan", "Google", "TensorFlow"]})
    jordans = by_name(http, bank_id)["Jordan"]
    assert len(jordans) == 2, "same name, no shared context, 60 days apart: someone new"

    # The same name again, this week, next to Google: scored against both namesakes, it is Google's Jordan.
    retain_fact(http, llm, bank_id, {"what": "Jordan presented TensorFlow Lite at Google I/O.",
                                     "entities": ["Jordan", "Google", "TensorFlow"]})
    counts = sorted(e["mention_count"] for e in by_name(http, bank_id)["Jordan"])
    assert counts == [1, 2]
    baker = next(e for e in by_name(http, bank_id)["Jordan"] if e["mention_count"] == 1)
    detail = http.get(f"/v1/default/banks/{bank_id}/entities/{baker['id']}").json()
    assert {p["canonical_name"] for p in detail["cooccurring"]} == {"Le Fournil", "Paris"}


def test_an_exact_name_with_recent_shared_context_is_the_same_entity(
    http: httpx.Client, llm: ScriptedLLM, llm_db: tuple[RunningServer, str], bank_id: str
) -> None:
    retain_fact(http, llm, bank_id, {"what": "Jordan bakes sourdough at Le Fournil.",
                                     "entities": ["Jordan", "Le Fournil"]})
    age_entities(llm_db[1], bank_id, 60)  # long ago, but the bakery is shared context
    retain_fact(http, llm, bank_id, {"what": "Jordan opened a second Le Fournil.",
                                     "entities": ["Jordan", "Le Fournil"]})
    assert [e["mention_count"] for e in by_name(http, bank_id)["Jordan"]] == [2]


def test_the_user_is_one_entity_whatever_the_context_and_gap(
    http: httpx.Client, llm: ScriptedLLM, llm_db: tuple[RunningServer, str], bank_id: str
) -> None:
    retain_fact(http, llm, bank_id, {"what": "The user likes green tea.", "entities": ["user"]})
    retain_fact(http, llm, bank_id, {"what": "Jordan likes green tea.", "entities": ["Jordan"]})
    age_entities(llm_db[1], bank_id, 60)
    retain_fact(http, llm, bank_id, {"what": "The user bought a bike.", "entities": ["user", "Halfords"]})
    retain_fact(http, llm, bank_id, {"what": "Jordan bought a bike.", "entities": ["Jordan", "Halfords"]})
    found = by_name(http, bank_id)
    assert [e["mention_count"] for e in found["user"]] == [2], "'user' is the bank's user, not a name"
    assert len(found["Jordan"]) == 2, "a name alone, long ago, with nothing shared: someone new (the seed's rule)"


class HeldTableLock:
    """Holds a SHARE ROW EXCLUSIVE lock on a table from a thread of its own until released: retains
    then stop at their first write to it, after resolving their entities, with them uncommitted."""

    def __init__(self, dsn: str, table: str) -> None:
        self.dsn, self.table = dsn, table
        self.held, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._hold()), daemon=True)

    async def _hold(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            async with conn.transaction():
                await conn.execute(f"LOCK TABLE {self.table} IN SHARE ROW EXCLUSIVE MODE")
                self.held.set()
                await asyncio.to_thread(self.release.wait, 60)
        finally:
            await conn.close()

    def __enter__(self) -> HeldTableLock:
        self.thread.start()
        assert self.held.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)


def waiting_backends(dsn: str) -> int:
    async def count() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, count()).result()


def test_concurrent_retains_of_a_new_name_converge_on_one_entity(
    http: httpx.Client, llm: ScriptedLLM, llm_db: tuple[RunningServer, str], bank_id: str
) -> None:
    """Names are not unique, so only resolution under a per-name lock keeps this one entity. The
    first retain is held after resolving "Quillon Vantrebel" (uncommitted) while the second resolves."""
    llm.handler = lambda request: {"facts": [{"what": request.user_text.split("Text:\n", 1)[1].strip(),
                                              "entities": ["Quillon Vantrebel"]}]}
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()

    def retain(n: int) -> int:
        with llm_db[0].client() as client:
            body = {"items": [{"content": f"Quillon Vantrebel cast bell {n}."}]}
            return client.post(f"/v1/default/banks/{bank_id}/memories", json=body).status_code

    with ThreadPoolExecutor(2) as pool:
        with HeldTableLock(llm_db[1], "memory_links"):
            first = pool.submit(retain, 1)
            wait_for(lambda: waiting_backends(llm_db[1]) == 1, "the first retain to reach its links")
            second = pool.submit(retain, 2)
            wait_for(lambda: waiting_backends(llm_db[1]) == 2, "the second retain to wait too")
        assert (first.result(), second.result()) == (200, 200)
    assert [e["mention_count"] for e in by_name(http, bank_id)["Quillon Vantrebel"]] == [2]


@pytest.mark.parametrize("together", [True, False], ids=["one retain", "separate retains"])
def test_identifiers_that_differ_in_a_digit_are_never_one_entity(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str, together: bool
) -> None:
    ids = ["ORD1234", "ORD1235", "ORD1236", "E10", "E100"]
    fact = {"what": "Acme Store shipped the orders.", "entities": ["Acme Store"]}
    if together:
        retain_fact(http, llm, bank_id, fact, entities=ids)
    else:
        for name in ids:  # each next to the same store, this week: everything but the digits says "same"
            retain_fact(http, llm, bank_id, fact, entities=[name])
    found = by_name(http, bank_id)
    assert {name: len(found.get(name, [])) for name in ids} == dict.fromkeys(ids, 1)
    assert all(found[name][0]["mention_count"] == 1 for name in ids)


def test_a_label_is_never_a_fuzzy_candidate_even_with_shared_recent_context(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    configure(http, bank_id, [CUSTOMER])
    retain_fact(http, llm, bank_id, {"what": "Dana Whitfield of Acme Corp reported a Billing API outage.",
                                     "entities": ["Dana Whitfield", "Billing API"],
                                     "labels": {"customer": [{"name": "Acme Corp"}]}})
    # The group leaves the config: its label entities stay labels, exempt from fuzzy resolution.
    configure(http, bank_id, [])
    # Similar name, the label's co-occurring entities, minutes later: a free entity would merge (≈ 0.73).
    retain_fact(http, llm, bank_id, {"what": "Acme Corp thanked Dana Whitfield for the Billing API fix.",
                                     "entities": ["Acme Corp", "Dana Whitfield", "Billing API"]})
    found = by_name(http, bank_id)
    assert found["customer:name:Acme Corp"][0]["metadata"]["entity_kind"] == "label"
    assert found["customer:name:Acme Corp"][0]["mention_count"] == 1
    assert found["Acme Corp"][0]["metadata"]["entity_kind"] == "free"


def test_a_free_entity_carrying_a_labels_name_first_becomes_the_label(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    configure(http, bank_id, [PRIORITY])
    retain_fact(http, llm, bank_id, {"what": "Dana escalated ticket 88.", "entities": ["Dana"]},
                entities=["priority:urgent"])
    retain_fact(http, llm, bank_id, {"what": "Dana's ticket 89 is urgent.", "entities": ["Dana"],
                                     "labels": {"priority": "urgent"}})
    found = by_name(http, bank_id)
    assert len(found["priority:urgent"]) == 1
    assert found["priority:urgent"][0]["metadata"]["entity_kind"] == "label", "promoted to the label"
    assert found["priority:urgent"][0]["mention_count"] == 2

    configure(http, bank_id, [])  # so only the label's kind protects it now
    retain_fact(http, llm, bank_id, {"what": "Dana flagged ticket 90.", "entities": ["Dana", "priority:urgen"]})
    found = by_name(http, bank_id)
    assert found["priority:urgent"][0]["mention_count"] == 2, "the typo is not merged into the label"
    assert found["priority:urgen"][0]["metadata"]["entity_kind"] == "free"


@pytest.mark.parametrize("together", [True, False], ids=["one retain", "separate retains"])
def test_names_shaped_like_a_configured_label_never_fuzzy_match(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str, together: bool
) -> None:
    configure(http, bank_id, [PRIORITY])
    names = ["priority:urgent", "priority:urgen"]
    if together:
        retain_fact(http, llm, bank_id, {"what": "Dana escalated ticket 88.", "entities": ["Dana", *names]})
    else:
        for name in names:
            retain_fact(http, llm, bank_id, {"what": "Dana escalated ticket 88.", "entities": ["Dana", name]})
    found = by_name(http, bank_id)
    assert [len(found.get(name, [])) for name in names] == [1, 1]
    assert found["priority:urgent"][0]["mention_count"] == 1
