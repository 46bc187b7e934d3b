"""The official `hindsight-client==1.1.0`, unchanged, against a live Engram server: banks and their
config, retain (sync, async, batch), recall options, memory listing, documents, and LLM extraction.
Every test checks that what comes back through the client is what was stored through it."""

from __future__ import annotations

import concurrent.futures
import functools
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.exceptions import NotFoundException

from tests.conftest import RunningServer
from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM

T = TypeVar("T")


class ThreadedClient:
    """The official client, with every call made on one thread of its own.

    The client's sync methods run on the calling thread's current event loop and keep their aiohttp
    session bound to it, while fixtures that call `asyncio.run()` on the test thread reset that loop
    mid-module. A private thread gives the client one loop for its whole life."""

    def __init__(self, base_url: str) -> None:
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hindsight-client")
        self._client: Hindsight = self._call(Hindsight, base_url=base_url, timeout=60)

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self._thread.submit(fn, *args, **kwargs).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        return functools.partial(self._call, attr) if callable(attr) else attr

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await one of the client's low-level (async-only) API calls, the way its sync methods do."""
        return self._call(_run_async, coro)

    def close(self) -> None:
        self._call(self._client.close)
        self._thread.shutdown()


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[ThreadedClient]:
    hindsight = ThreadedClient(server.url)
    yield hindsight
    hindsight.close()


def wait_for_operation(client: ThreadedClient, bank_id: str, operation_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status = client.run(client.operations.get_operation_status(bank_id, operation_id))
        if status.status in ("completed", "failed", "cancelled"):
            return status
        assert time.monotonic() < deadline, f"operation {operation_id} still {status.status} after {timeout}s"
        time.sleep(0.1)


def all_memories(client: ThreadedClient, bank_id: str, **filters: Any) -> list[Any]:
    return client.list_memories(bank_id, limit=1000, **filters).items


# --- banks ------------------------------------------------------------------------------------


def test_bank_profile_config_overrides_and_delete(client: ThreadedClient, bank_id: str) -> None:
    profile = client.create_bank(
        bank_id,
        name="Support agent",
        mission="Help customers of Acme with their orders",
        disposition_skepticism=4,
        disposition_literalism=2,
        disposition_empathy=5,
    )
    assert profile.bank_id == bank_id
    assert profile.name == "Support agent"
    assert profile.mission == "Help customers of Acme with their orders"
    assert (profile.disposition.skepticism, profile.disposition.literalism, profile.disposition.empathy) == (4, 2, 5)

    updated = client.update_bank_config(
        bank_id, retain_chunk_size=800, enable_observations=False, recall_budget_fixed_low=7,
        retain_mission="Orders and deliveries",
    )
    assert updated["overrides"]["retain_chunk_size"] == 800

    config = client.get_bank_config(bank_id)
    assert config["bank_id"] == bank_id
    expected = {"retain_chunk_size": 800, "enable_observations": False, "recall_budget_fixed_low": 7,
                "retain_mission": "Orders and deliveries"}
    assert {k: config["overrides"].get(k) for k in expected} == expected
    assert {k: config["config"].get(k) for k in expected} == expected, "overrides win in the resolved config"
    assert config["config"]["recall_budget_fixed_high"] == 1000, "unset settings resolve to the default"
    assert config["config"]["disposition_empathy"] == 5

    reset = client.reset_bank_config(bank_id)
    assert reset["overrides"] == {}
    assert reset["config"]["retain_chunk_size"] == 3000

    client.delete_bank(bank_id)
    listed = client.run(client.banks.list_banks(q=bank_id))
    assert bank_id not in [b.bank_id for b in listed.banks]
    with pytest.raises(aiohttp.ClientResponseError) as error:
        client.get_bank_config(bank_id)
    assert error.value.status == 404


# --- retain -----------------------------------------------------------------------------------


def test_sync_retain_stores_every_field(client: ThreadedClient, bank_id: str) -> None:
    response = client.retain(
        bank_id,
        "Alice moved to Lisbon in June 2024. Alice works at Acme as a product designer.",
        timestamp=datetime(2024, 7, 1, 9, 30, tzinfo=UTC),
        context="onboarding call",
        metadata={"source": "crm", "call": "17"},
        tags=["team:design"],
        document_id="call-17",
    )
    assert response.success is True
    assert response.bank_id == bank_id
    assert response.items_count == 1
    assert response.var_async is False

    memories = all_memories(client, bank_id)
    assert len(memories) >= 2
    assert any("Lisbon" in m.text for m in memories)
    assert any("Acme" in m.text for m in memories)
    for memory in memories:
        assert memory.fact_type == "world"
        assert memory.context == "onboarding call"
        assert memory.metadata == {"source": "crm", "call": "17"}
        assert memory.tags == ["team:design"]
        assert memory.document_id == "call-17"
        assert memory.mentioned_at is not None and memory.mentioned_at.startswith("2024-07-01")

    top = client.recall(bank_id, "Which city did Alice move to?").results[0]
    assert "Lisbon" in top.text
    assert top.context == "onboarding call"
    assert top.metadata == {"source": "crm", "call": "17"}
    assert top.tags == ["team:design"]
    assert top.document_id == "call-17"


def test_async_retain_completes_and_its_memories_are_listed(client: ThreadedClient, bank_id: str) -> None:
    response = client.retain(
        bank_id, "The warehouse in Rotterdam ships orders every Tuesday.", retain_async=True, tags=["ops"]
    )
    assert response.var_async is True
    assert response.operation_id
    assert response.operation_ids in (None, [response.operation_id])

    status = wait_for_operation(client, bank_id, response.operation_id)
    assert status.status == "completed", status.error_message
    assert status.operation_id == response.operation_id
    assert status.operation_type == "retain"
    assert status.error_message is None

    listed = client.run(client.operations.list_operations(bank_id, status="completed"))
    assert response.operation_id in [op.id for op in listed.operations]

    (memory,) = all_memories(client, bank_id)
    assert "Rotterdam" in memory.text
    assert memory.tags == ["ops"]


def test_async_retain_with_an_operation_id_is_idempotent(client: ThreadedClient, bank_id: str) -> None:
    operation_id = str(uuid.uuid4())
    content = "The Berlin office closes early on Fridays."
    first = client.retain(bank_id, content, retain_async=True, operation_id=operation_id)
    again = client.retain(bank_id, content, retain_async=True, operation_id=operation_id)
    assert first.operation_id == again.operation_id == operation_id
    assert wait_for_operation(client, bank_id, operation_id).status == "completed"
    assert len(all_memories(client, bank_id)) == 1, "the repeated request stored nothing twice"


def test_retain_batch_merges_document_tags_into_every_item(client: ThreadedClient, bank_id: str) -> None:
    response = client.retain_batch(
        bank_id,
        items=[
            {"content": "Priya leads the payments team.", "tags": ["team:payments"]},
            {"content": "The payments service is written in Go.", "context": "architecture review"},
            {"content": "Refunds take five business days.", "document_id": "refund-policy",
             "metadata": {"owner": "finance"}},
        ],
        document_tags=["import:2024-09"],
    )
    assert response.items_count == 3
    assert response.var_async is False

    memories = {m.text: m for m in all_memories(client, bank_id)}
    assert len(memories) == 3
    by_word = {word: next(m for text, m in memories.items() if word in text) for word in ("Priya", "Go", "Refunds")}
    assert sorted(by_word["Priya"].tags) == ["import:2024-09", "team:payments"]
    assert by_word["Go"].tags == ["import:2024-09"]
    assert by_word["Go"].context == "architecture review"
    assert by_word["Refunds"].document_id == "refund-policy"
    assert by_word["Refunds"].metadata == {"owner": "finance"}

    strict = all_memories(client, bank_id, tags=["team:payments"], tags_match="all_strict")
    assert [m.text for m in strict] == [by_word["Priya"].text]


# --- recall -----------------------------------------------------------------------------------

TAGGED_NOTES = [
    ("The red dashboard shows weekly revenue.", ["finance"]),
    ("The red dashboard shows revenue by finance region and by sales rep.", ["finance", "sales"]),
    ("The red dashboard shows sales leads per week.", ["sales"]),
    ("The red dashboard was designed by the platform team.", []),
]


@pytest.fixture
def tagged_bank(client: ThreadedClient, bank_id: str) -> str:
    client.retain_batch(bank_id, items=[{"content": text, "tags": tags} for text, tags in TAGGED_NOTES])
    return bank_id


@pytest.mark.parametrize(
    ("tags", "mode", "expected"),
    [
        (["finance"], "any", {0, 1, 3}),
        (["finance", "sales"], "all_strict", {1}),
        (["sales"], "exact", {2}),
        (["sales", "finance"], "exact", {1}),
    ],
)
def test_recall_filters_by_tags(
    client: ThreadedClient, tagged_bank: str, tags: list[str], mode: str, expected: set[int]
) -> None:
    results = client.recall(tagged_bank, "red dashboard", tags=tags, tags_match=mode).results
    found = {i for i, (text, _) in enumerate(TAGGED_NOTES) if any(r.text == text for r in results)}
    assert found == expected
    tags_by_text = dict(TAGGED_NOTES)
    for result in results:
        assert set(result.tags or []) == set(tags_by_text[result.text]), "each result carries its own tags"


def test_recall_filters_by_type(client: ThreadedClient, tagged_bank: str) -> None:
    world = client.recall(tagged_bank, "red dashboard", types=["world"]).results
    assert len(world) == len(TAGGED_NOTES)
    assert {r.type for r in world} == {"world"}
    assert client.recall(tagged_bank, "red dashboard", types=["experience", "observation"]).results == []


def test_recall_budget_and_max_tokens_bound_the_results(client: ThreadedClient, bank_id: str) -> None:
    client.update_bank_config(bank_id, recall_budget_fixed_low=3)
    fruits = ["apples", "pears", "plums", "cherries", "grapes", "figs", "lemons", "limes", "peaches", "apricots",
              "melons", "mangoes", "kiwis", "dates", "quinces", "oranges", "guavas", "papayas", "lychees", "olives"]
    client.retain(bank_id, " ".join(f"The orchard behind the farmhouse grows {fruit}." for fruit in fruits))

    low = client.recall(bank_id, "what grows in the orchard", budget="low").results
    high = client.recall(bank_id, "what grows in the orchard", budget="high").results
    stored = client.list_memories(bank_id).total
    assert stored >= len(fruits) - 2
    assert 0 < len(low) <= 3, "budget low takes recall_budget_fixed_low candidates"
    assert len(high) == stored

    small = client.recall(bank_id, "what grows in the orchard", max_tokens=40).results
    assert 0 < len(small) < len(high)
    assert [r.id for r in small] == [r.id for r in high[: len(small)]], "the cut keeps rank order"


def test_recall_includes_entities_and_a_trace(client: ThreadedClient, bank_id: str) -> None:
    client.retain(bank_id, "Melanie painted a sunrise over Lake Tahoe with her kids.")
    response = client.recall(bank_id, "What did Melanie paint?", include_entities=True, trace=True)
    assert "sunrise" in response.results[0].text
    assert "Melanie" in (response.results[0].entities or [])
    assert response.entities is not None and "Melanie" in response.entities
    melanie = response.entities["Melanie"]
    assert melanie.canonical_name == "Melanie"
    assert melanie.entity_id
    assert isinstance(response.trace, dict) and response.trace

    plain = client.recall(bank_id, "What did Melanie paint?")
    assert plain.entities is None and plain.trace is None, "nothing extra unless asked for"


# --- listing ------------------------------------------------------------------------------------

ANIMALS = ["giraffe", "zebra", "otter", "walrus", "falcon", "badger", "heron", "lynx", "bison", "gecko",
           "marmot", "tapir"]


def test_list_memories_pages_searches_and_filters_by_type(client: ThreadedClient, bank_id: str) -> None:
    client.retain_batch(
        bank_id, items=[{"content": f"The zoo keeper fed the {animal} at noon."} for animal in ANIMALS]
    )
    pages = [client.list_memories(bank_id, limit=5, offset=offset) for offset in (0, 5, 10)]
    assert [len(page.items) for page in pages] == [5, 5, 2]
    assert {page.total for page in pages} == {len(ANIMALS)}
    assert [(page.limit, page.offset) for page in pages] == [(5, 0), (5, 5), (5, 10)]
    ids = [m.id for page in pages for m in page.items]
    assert len(set(ids)) == len(ANIMALS), "pages do not overlap"
    texts = {m.text for page in pages for m in page.items}
    assert all(any(animal in text for text in texts) for animal in ANIMALS)

    found = client.list_memories(bank_id, search_query="walrus")
    assert found.total == 1
    assert "walrus" in found.items[0].text

    assert client.list_memories(bank_id, type="world").total == len(ANIMALS)
    experience = client.list_memories(bank_id, type="experience")
    assert (experience.total, experience.items) == (0, [])


# --- documents ----------------------------------------------------------------------------------


def test_documents_can_be_listed_read_and_deleted(client: ThreadedClient, bank_id: str) -> None:
    handbook = "New hires get a laptop on day one. The security training is due within a week."
    faq = "Lunch is served at noon in the atrium."
    client.retain(bank_id, handbook, document_id="handbook", tags=["hr"])
    client.retain(bank_id, faq, document_id="faq")

    listed = client.run(client.documents.list_documents(bank_id))
    assert listed.total == 2
    assert {d.id for d in listed.items} == {"handbook", "faq"}

    document = client.run(client.documents.get_document(bank_id, "handbook"))
    handbook_facts = all_memories(client, bank_id, document_id="handbook")
    assert document.id == "handbook"
    assert document.bank_id == bank_id
    assert document.original_text == handbook
    assert document.tags == ["hr"]
    assert document.memory_unit_count == len(handbook_facts) >= 2

    deleted = client.run(client.documents.delete_document(bank_id, "handbook"))
    assert deleted.success is True
    assert deleted.document_id == "handbook"
    assert deleted.memory_units_deleted == len(handbook_facts)
    assert {m.document_id for m in all_memories(client, bank_id)} == {"faq"}
    with pytest.raises(NotFoundException):
        client.run(client.documents.get_document(bank_id, "handbook"))


# --- extraction with an LLM ------------------------------------------------------------------------


def test_llm_extraction_through_the_client(llm_server: RunningServer, llm: ScriptedLLM, bank_id: str) -> None:
    def answer(request: ChatRequest) -> Reply | dict[str, Any]:
        if request.schema_name != "ExtractionOutput":
            return Reply.error(400, "only extraction is scripted here")
        return {"facts": [
            {"what": "The user asked for a table for two in Porto on March 2", "fact_type": "world",
             "fact_kind": "event", "occurred_start": "2024-03-02T19:00:00Z", "entities": ["user", "Porto"]},
            {"what": "The assistant booked a table for two at Casa Azul in Porto", "fact_type": "assistant",
             "fact_kind": "event", "occurred_start": "2024-03-02T19:00:00Z", "entities": ["Casa Azul", "Porto"],
             "why": "the user asked for it", "causal_relations": [{"caused_by": 0}]},
        ]}

    llm.handler = answer
    client = ThreadedClient(llm_server.url)
    try:
        content = "User: can you get us a table for two in Porto on Saturday?\nAssistant: Booked Casa Azul for 7pm."
        response = client.retain(bank_id, content, timestamp="2024-02-28T10:00:00Z", context="chat")
        assert response.success is True
        assert response.usage is not None and response.usage.input_tokens == 10

        (request,) = [r for r in llm.requests if r.schema_name == "ExtractionOutput"]
        assert "Casa Azul" in request.user_text

        memories = all_memories(client, bank_id)
        by_type = {m.fact_type: m for m in memories}
        assert sorted(by_type) == ["experience", "world"], "an assistant fact is stored as experience"
        booked = by_type["experience"]
        assert "booked a table for two at Casa Azul" in booked.text
        assert booked.occurred_start is not None and booked.occurred_start.startswith("2024-03-02")
        assert booked.context == "chat"
        assert "Casa Azul" in booked.entities

        results = client.recall(bank_id, "Which restaurant did the assistant book?", types=["experience"]).results
        assert [r.id for r in results] == [booked.id]
    finally:
        client.close()
