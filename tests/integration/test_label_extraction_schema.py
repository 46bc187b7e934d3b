"""What the extraction request asks of the LLM when a bank has entity labels, read from the request the
scripted LLM received: `optional: false` makes a group required in the schema and the prompt, labels-only
mode removes free-form entities from both, descriptions reach the prompt. Then what labels give back: one
shared entity per label, and recall by a label tag with Hindsight 1.1.0's tag semantics (untagged
memories pass `any` and `all`; `all_strict` keeps only the tagged ones)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hindsight_client import Hindsight

from tests.conftest import RunningServer
from tests.integration.test_entity_labels import SUPPORT_LABELS, TICKET, configure, ticket_answer
from tests.support.scripted_llm import ChatRequest, ScriptedLLM


@pytest.fixture
def http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


def extraction_request(llm: ScriptedLLM) -> ChatRequest:
    return next(r for r in reversed(llm.requests) if r.schema_name == "ExtractionOutput")


def fact_schema(request: ChatRequest) -> dict[str, Any]:
    return request.schema["$defs"]["LLMFact"]


def with_optional(**required: bool) -> list[dict]:
    """SUPPORT_LABELS with `optional` set per key."""
    return [{**group, "optional": not required[group["key"]]} if group["key"] in required else group
            for group in SUPPORT_LABELS]


def test_optional_false_makes_a_group_required_in_the_schema_and_the_prompt(
    http: httpx.Client, llm: ScriptedLLM, bank_id: str
) -> None:
    labels = with_optional(priority=True, product_area=True, customer=True)
    assert http.patch(f"/v1/default/banks/{bank_id}/config",
                      json={"updates": {"entity_labels": labels}}).status_code == 200
    llm.handler = lambda request: ticket_answer([])
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": TICKET}]}).raise_for_status()
    request = extraction_request(llm)

    groups = request.schema["$defs"]["Labels"]
    assert {"priority", "product_area", "customer"} <= set(groups["required"])
    assert "sentiment" not in groups.get("required", []), "sentiment stays optional"
    priority = groups["properties"]["priority"]
    assert "anyOf" not in priority and priority["enum"] == ["low", "medium", "high", "urgent"], "no null allowed"
    assert groups["properties"]["product_area"]["minItems"] == 1
    assert groups["properties"]["customer"]["minItems"] == 1
    assert {"type": "null"} in groups["properties"]["sentiment"]["anyOf"]
    assert "labels" in fact_schema(request)["required"], "a fact cannot leave its labels out"

    prompt = request.system_prompt
    assert "- priority (single value, REQUIRED): Urgency of the support request" in prompt
    assert "- sentiment (single value or null): Customer's emotional tone in the ticket" in prompt
    assert "A group marked REQUIRED must always be filled" in prompt


def test_all_optional_groups_stay_nullable(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    configure(http, bank_id)
    llm.handler = lambda request: ticket_answer([])
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": TICKET}]}).raise_for_status()
    request = extraction_request(llm)
    assert "required" not in request.schema["$defs"]["Labels"]
    assert "labels" not in fact_schema(request).get("required", [])
    assert "REQUIRED" not in request.system_prompt


def test_labels_only_mode_never_asks_for_free_form_entities(http: httpx.Client, llm: ScriptedLLM,
                                                            bank_id: str) -> None:
    asked: dict[bool, ChatRequest] = {}
    for free_form in (True, False):
        bank = f"{bank_id}-{'free' if free_form else 'labels'}"
        configure(http, bank, entities_allow_free_form=free_form)
        llm.handler = lambda request: ticket_answer([])
        http.post(f"/v1/default/banks/{bank}/memories", json={"items": [{"content": TICKET}]}).raise_for_status()
        asked[free_form] = extraction_request(llm)

    assert "entities" in fact_schema(asked[True])["properties"]
    assert "'entities' field" in asked[True].system_prompt and "\n- entities:" in asked[True].system_prompt
    labels_only = asked[False]
    assert "entities" not in fact_schema(labels_only)["properties"], "the schema has no free-form entities field"
    assert "'entities' field" not in labels_only.system_prompt and "\n- entities:" not in labels_only.system_prompt
    assert "do not extract any other entities" in labels_only.system_prompt
    assert "labels" in fact_schema(labels_only)["properties"]


def test_descriptions_are_injected_into_the_prompt(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    labels = [{"key": "tier", "description": "The customer's plan", "values": [
        {"value": "free", "description": "no paid plan"}, {"value": "pro"}]}]
    assert http.patch(f"/v1/default/banks/{bank_id}/config",
                      json={"updates": {"entity_labels": labels}}).status_code == 200
    llm.handler = lambda request: {"facts": [{"what": "A customer on the free plan asked for help"}]}
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "help"}]}).raise_for_status()
    prompt = extraction_request(llm).system_prompt
    assert "- tier (single value or null): The customer's plan" in prompt
    assert '• "free" — no paid plan' in prompt and '• "pro"' in prompt


def test_memories_with_the_same_label_share_one_entity(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    configure(http, bank_id)
    llm.handler = lambda request: ticket_answer([])
    for _ in range(2):
        http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": TICKET}]}).raise_for_status()
    items = http.get(f"/v1/default/banks/{bank_id}/entities", params={"q": "priority:urgent"}).json()["items"]
    (urgent,) = [e for e in items if e["canonical_name"] == "priority:urgent"]
    assert urgent["mention_count"] == 2
    detail = http.get(f"/v1/default/banks/{bank_id}/entities/{urgent['id']}").json()
    assert len({f["id"] for f in detail["facts"]}) == 2, "both memories link to the one label entity"


# --- recall by a label tag ---------------------------------------------------------------------------

MEMORIES = {
    "urgent billing": ({"priority": "urgent", "product_area": ["billing"]}, "Checkout is broken for Acme Corp."),
    "low billing": ({"priority": "low", "product_area": ["billing"]}, "A customer asked how to export invoices."),
    "untagged": (None, "A customer asked about checkout opening hours."),
}


def tagged_and_untagged_bank(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    configure(http, bank_id)

    def answer(request: ChatRequest) -> dict:
        labels, text = next(value for key, value in MEMORIES.items() if f"[{key}]" in request.user_text)
        return {"facts": [{"what": text, "entities": [], "labels": labels}]}

    llm.handler = answer
    for key in MEMORIES:
        http.post(f"/v1/default/banks/{bank_id}/memories",
                  json={"items": [{"content": f"[{key}] ticket"}]}).raise_for_status()


def recalled(http: httpx.Client, bank_id: str, tags: list[str], match: str | None) -> set[str]:
    body: dict[str, Any] = {"query": "customer checkout billing invoices", "tags": tags, "budget": "high"}
    if match:
        body["tags_match"] = match
    results = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json=body).json()["results"]
    return {key for key, (_, text) in MEMORIES.items() if any(r["text"].startswith(text[:-1]) for r in results)}


def test_recall_by_a_label_tag_lets_untagged_memories_through_unless_strict(
    http: httpx.Client, llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    tagged_and_untagged_bank(http, llm, bank_id)
    everything = recalled(http, bank_id, [], None)
    assert everything == set(MEMORIES), "the query reaches every memory when nothing filters"

    # Hindsight 1.1.0: "any" (the default) and "all" include untagged memories.
    assert recalled(http, bank_id, ["priority:urgent"], None) == {"urgent billing", "untagged"}
    assert recalled(http, bank_id, ["priority:urgent"], "all") == {"urgent billing", "untagged"}
    # Only the strict modes restrict recall to memories carrying the tag.
    assert recalled(http, bank_id, ["priority:urgent"], "all_strict") == {"urgent billing"}
    assert recalled(http, bank_id, ["priority:urgent", "product_area:billing"], "all_strict") == {"urgent billing"}
    assert recalled(http, bank_id, ["priority:urgent", "product_area:billing"], None) == set(MEMORIES), (
        "with the default 'any', a second tag widens the filter")

    with Hindsight(base_url=llm_server.url) as client:  # the blog's call, through the official client
        loose = client.recall(bank_id, "customer checkout billing invoices", tags=["priority:urgent"],
                              tags_match="all", budget="high").results
        strict = client.recall(bank_id, "customer checkout billing invoices", tags=["priority:urgent"],
                               tags_match="all_strict", budget="high").results
    assert sorted(r.tags or [] for r in loose) == [[], ["priority:urgent", "product_area:billing"]]
    assert [r.tags for r in strict] == [["priority:urgent", "product_area:billing"]]
