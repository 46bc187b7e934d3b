"""`include.entities` in a recall: the results' entities in the order of the best result naming each
(a result's own names alphabetically), each with its own summary first (with `stale`) and then the
consolidation observations that mention it, cut at the first entity whose name and observations do
not fit `max_tokens` (counted with the server's tokenizer)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from engram.models.tokens import count_tokens
from tests.conftest import RunningServer
from tests.integration.test_entity_kinds_and_observations import Script as SummaryScript
from tests.support.scripted_llm import ChatRequest, ScriptedLLM
from tests.support.waiting import settle

FACT_LINE = re.compile(r"^(F\d+)\b.*?: (.*)$")


class Script(SummaryScript):
    """As test_entity_kinds_and_observations' (facts from [bracketed] names, numbered summaries), and
    consolidation makes one observation a batch, from its first fact."""

    def __call__(self, request: ChatRequest) -> Any:
        if request.schema_name == "ConsolidationActions":
            for line in request.user_text.splitlines():
                if match := FACT_LINE.match(line):
                    handle, text = match.groups()
                    evidence = [{"fact": handle, "quote": text[:10]}]
                    return {"creates": [{"text": f"Noted that {text}", "evidence": evidence}]}
        return super().__call__(request)


def recall(http: httpx.Client, bank_id: str, max_tokens: int) -> dict[str, Any]:
    return http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={
        "query": "What did Kofi grow in the orchard?", "include": {"entities": {"max_tokens": max_tokens}},
    }).json()


def cost(name: str, entity: dict[str, Any]) -> int:
    return count_tokens(name) + sum(count_tokens(o["text"]) for o in entity["observations"])


def test_included_entities_follow_the_results_and_keep_to_their_token_budget(
    llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = Script()
    items = [f"Kofi grew mango tree {n} in the orchard. [Kofi, Orchard]" for n in range(5)]
    items += ["Ama sold Kofi's mangoes at the Accra market. [Ama, Kofi, Accra]",
              "Yaw repaired the orchard fence. [Yaw, Orchard]"]
    with llm_server.client() as http:
        for item in items:
            http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": item}]}).raise_for_status()
            settle(http, bank_id)
        response = recall(http, bank_id, 10_000)

        expected = list(dict.fromkeys(name for r in response["results"] for name in r.get("entities", [])))
        entities = response["entities"]
        assert list(entities) == expected, "by the best result naming each, a result's names alphabetically"
        assert {"Kofi", "Orchard", "Ama", "Accra", "Yaw"} <= set(entities)
        assert all(e["canonical_name"] == name and e["entity_id"] for name, e in entities.items())

        kofi = entities["Kofi"]["observations"]
        assert kofi[0]["text"].startswith("Summary number") and kofi[0]["stale"] is False, "its own one first"
        noted = kofi[1:]
        assert noted and all(o["text"].startswith("Noted that") and "stale" not in o for o in noted)
        assert all(o["mentioned_at"] for o in kofi)

        first, second = expected[0], expected[1]
        both = cost(first, entities[first]) + cost(second, entities[second])
        assert both > cost(first, entities[first]) > 0
        assert list(recall(http, bank_id, both)["entities"]) == [first, second]
        assert list(recall(http, bank_id, both - 1)["entities"]) == [first], "observations count too"
