"""Entities end to end: one person named three ways resolves to one entity, co-occurrences are
counted, the graph arm finds a fact linked only through a shared entity, concurrent retains never
duplicate an entity, and deletions keep counts honest."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import RunningServer
from tests.support.scripted_llm import ScriptedLLM

STORY = {
    "Alice Chen works at Google on TensorFlow.": ["Alice Chen", "Google", "TensorFlow"],
    "Alice gave a TensorFlow talk for Google engineers.": ["Alice", "TensorFlow", "Google"],
    "Ms. Chen published her TensorFlow benchmarks.": ["Ms. Chen", "TensorFlow"],
    "Alice Wong joined Microsoft as a product manager.": ["Alice Wong", "Microsoft"],
    "Alice Chen adopted a ginger cat called Miso.": ["Alice Chen", "Miso"],
}


def extraction(request) -> dict:
    """Answer each extraction with the story's sentence as one fact and its entities."""
    text = request.user_text.split("Text:\n", 1)[1].strip()
    return {"facts": [{"what": text, "fact_type": "world", "entities": STORY[text]}]}


@pytest.fixture
def story_bank(llm_server: RunningServer, llm: ScriptedLLM, bank_id: str) -> str:
    llm.handler = extraction
    with llm_server.client() as client:
        for sentence in STORY:  # one retain each: resolution runs against what is already stored
            client.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": sentence}]}
                        ).raise_for_status()
    return bank_id


def entities_by_name(client: httpx.Client, bank_id: str) -> dict[str, dict]:
    items = client.get(f"/v1/default/banks/{bank_id}/entities", params={"limit": 100}).json()["items"]
    return {e["canonical_name"]: e for e in items}


def test_one_person_named_three_ways_is_one_entity(llm_server: RunningServer, story_bank: str) -> None:
    with llm_server.client() as client:
        entities = entities_by_name(client, story_bank)
        assert set(entities) == {"Alice Chen", "Google", "TensorFlow", "Alice Wong", "Microsoft", "Miso"}
        alice = entities["Alice Chen"]
        assert alice["mention_count"] == 4
        assert entities["Alice Wong"]["mention_count"] == 1, "a different Alice stays a different entity"

        detail = client.get(f"/v1/default/banks/{story_bank}/entities/{alice['id']}").json()
        assert detail["aliases"] == ["Alice", "Alice Chen", "Ms. Chen"]
        assert len(detail["facts"]) == 4
        partners = {p["canonical_name"]: p["count"] for p in detail["cooccurring"]}
        assert partners == {"TensorFlow": 3, "Google": 2, "Miso": 1}

        graph = client.get(f"/v1/default/banks/{story_bank}/entities/graph").json()
        assert graph["total_entities"] == 6
        names = {n["data"]["id"]: n["data"]["label"] for n in graph["nodes"]}
        edge_names = {frozenset((names[e["data"]["source"]], names[e["data"]["target"]])) for e in graph["edges"]}
        assert frozenset(("Alice Chen", "TensorFlow")) in edge_names
        assert frozenset(("Alice Wong", "Microsoft")) in edge_names
        assert frozenset(("Alice Wong", "TensorFlow")) not in edge_names


def test_graph_arm_finds_a_fact_linked_only_through_an_entity(llm_server: RunningServer, story_bank: str) -> None:
    with llm_server.client() as client:
        response = client.post(
            f"/v1/default/banks/{story_bank}/memories/recall",
            json={"query": "Who builds TensorFlow at Google?", "trace": True, "min_scores": {"semantic": 0.5}},
        ).json()
    miso = next(r for r in response["results"] if "Miso" in r["text"])
    ranks = next(t["ranks"] for t in response["trace"]["results"] if t["id"] == miso["id"])
    assert set(ranks) == {"graph"}, "found neither by meaning nor by words, only through Alice Chen"
    assert "Alice Chen" in miso["entities"]


def test_include_entities_returns_the_results_entities(llm_server: RunningServer, story_bank: str) -> None:
    with llm_server.client() as client:
        response = client.post(
            f"/v1/default/banks/{story_bank}/memories/recall",
            json={"query": "Microsoft product manager", "include": {"entities": {"max_tokens": 500}}},
        ).json()
    assert "Alice Wong" in response["entities"]
    assert response["entities"]["Alice Wong"]["canonical_name"] == "Alice Wong"

    with llm_server.client() as client:
        tight = client.post(
            f"/v1/default/banks/{story_bank}/memories/recall",
            json={"query": "Microsoft product manager", "include": {"entities": {"max_tokens": 2}}},
        ).json()
    assert len(tight["entities"]) < len(response["entities"]), "the entity list keeps to its token limit"


def test_resolve_entities_false_only_reuses_exact_names(
    llm_server: RunningServer, llm: ScriptedLLM, story_bank: str
) -> None:
    llm.handler = lambda request: {"facts": [{"what": "Alice reviewed a TensorFlow patch.", "entities": []}]}
    with llm_server.client() as client:
        client.post(
            f"/v1/default/banks/{story_bank}/memories",
            json={"items": [{"content": "review", "entities": [{"text": "Alice"}, {"text": "tensorflow"}],
                             "resolve_entities": False}]},
        ).raise_for_status()
        entities = entities_by_name(client, story_bank)
    assert "Alice" in entities, "no fuzzy match to Alice Chen when resolution is off"
    assert entities["TensorFlow"]["mention_count"] == 4, "exact names (any case) still resolve"


def test_concurrent_retains_never_duplicate_an_entity(server: RunningServer, bank_id: str) -> None:
    def retain(n: int) -> int:
        with server.client() as client:
            return client.post(
                f"/v1/default/banks/{bank_id}/memories",
                json={"items": [{"content": f"Zephyrine met Quillon at Brightwater Labs on day {n}."}]},
            ).status_code

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(retain, range(8))) == [200] * 8
    with server.client() as client:
        items = client.get(f"/v1/default/banks/{bank_id}/entities").json()["items"]
    names = [e["canonical_name"].lower() for e in items]
    assert len(names) == len(set(names))
    counts = {e["canonical_name"]: e["mention_count"] for e in items}
    assert counts["Zephyrine"] == counts["Quillon"] == counts["Brightwater Labs"] == 8


def test_deleting_a_document_updates_counts_and_drops_orphans(server: RunningServer, bank_id: str) -> None:
    with server.client() as client:
        for doc, text in [("a", "Ingrid and Tomas sailed to Malta."), ("b", "Ingrid painted a portrait of Tomas.")]:
            client.post(f"/v1/default/banks/{bank_id}/memories",
                        json={"items": [{"content": text, "document_id": doc}]}).raise_for_status()
        before = entities_by_name(client, bank_id)
        assert before["Ingrid"]["mention_count"] == 2 and "Malta" in before

        client.delete(f"/v1/default/banks/{bank_id}/documents/a").raise_for_status()
        after = entities_by_name(client, bank_id)
        assert "Malta" not in after, "an entity no fact mentions is removed"
        assert after["Ingrid"]["mention_count"] == 1
        detail = client.get(f"/v1/default/banks/{bank_id}/entities/{after['Ingrid']['id']}").json()
        assert {p["canonical_name"]: p["count"] for p in detail["cooccurring"]} == {"Tomas": 1}


PAIR_STORY = {
    "Nadia Petrova and Omar Haddad designed the solar kite.": ["Nadia Petrova", "Omar Haddad"],
    **{f"Nadia Petrova and Omar Haddad {what}.": ["Nadia Petrova", "Omar Haddad"]
       for what in ("ate noodles", "visited a museum", "watched a storm", "painted a fence")},
    **{f"{who} {what}.": [who] for who, what in (("Nadia Petrova", "ate cereal"), ("Omar Haddad", "fixed a bike"),
                                                  ("Nadia Petrova", "read a novel"), ("Omar Haddad", "lost a key"))},
}


def test_the_graph_arm_ranks_facts_sharing_more_of_a_seeds_entities_first(
    llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    def pair_extraction(request) -> dict:
        text = request.user_text.split("Text:\n", 1)[1].strip()
        return {"facts": [{"what": text, "fact_type": "world", "entities": PAIR_STORY[text]}]}

    llm.handler = pair_extraction
    with llm_server.client() as client:
        for sentence in PAIR_STORY:
            client.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": sentence}]}
                        ).raise_for_status()
        response = client.post(
            f"/v1/default/banks/{bank_id}/memories/recall",
            json={"query": "Who designed the solar kite?", "trace": True, "min_scores": {"semantic": 0.5}},
        ).json()
    texts = {r["id"]: r["text"] for r in response["results"]}
    graph = sorted((t["ranks"]["graph"], texts[t["id"]]) for t in response["trace"]["results"] if "graph" in t["ranks"])
    order = [text for _, text in graph]
    assert len(order) == 8, order
    both = [text for text in order if "and" in text]
    assert order[:4] == both, "the four facts naming both of the seed's people come before those naming one"
