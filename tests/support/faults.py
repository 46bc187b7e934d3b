"""Helpers of the fault-injection tests: a scripted model whose faults a test switches on and off, and
checks that a bank holds each fact once and that its stats agree with its memory list."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.scripted_llm import ChatRequest, Reply, ScriptedLLM
from tests.support.waiting import settle, wait_for  # noqa: F401 - re-exported to the fault tests

API = "/v1/default/banks"
TERMINAL = {"completed", "failed", "cancelled"}
NEW_FACT = re.compile(r"^(F\d+) \[[^\]]*\]: (.*)$")

# --- the scripted model ------------------------------------------------------------------------------


def extracted(request: ChatRequest) -> dict[str, Any]:
    """A valid extraction: one world fact per non-empty line, its first word as its entity."""
    text = request.user_text.split("Text:\n", 1)[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return {"facts": [{"what": line, "fact_type": "world", "entities": [line.split()[0]]} for line in lines]}


def new_facts(request: ChatRequest) -> list[tuple[str, str]]:
    """(handle, text) of the facts a consolidation prompt shows."""
    return [m.groups() for line in request.user_text.splitlines() if (m := NEW_FACT.match(line))]


def one_observation_per_fact(request: ChatRequest) -> dict[str, Any]:
    """A valid consolidation answer: one new observation per fact, citing it."""
    return {"creates": [{"text": f"Observation: {text}", "evidence": [{"fact": handle, "quote": text}]}
                        for handle, text in new_facts(request)]}


class Model:
    """The scripted LLM's behaviour for a test: healthy by default; `retain_fault` / `consolidation_fault`
    (a function of the request returning a Reply, or None for a healthy answer) inject faults."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.retain_fault: Callable[[ChatRequest], Reply | None] = lambda request: None
        self.consolidation_fault: Callable[[ChatRequest], Reply | None] = lambda request: None
        self.consolidate: Callable[[ChatRequest], Any] = one_observation_per_fact
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        llm.handler = self.answer

    def answer(self, request: ChatRequest) -> Any:
        with self._lock:
            self.calls[request.schema_name or "?"] += 1
        if request.schema_name == "ExtractionOutput":
            return self.retain_fault(request) or extracted(request)
        if request.schema_name == "ConsolidationActions":
            return self.consolidation_fault(request) or self.consolidate(request)
        if request.schema_name == "MergeDecision":
            return {"decision": "keep", "text": None}
        return Reply.error(400, f"unexpected schema {request.schema_name}")

    def healthy(self) -> None:
        self.retain_fault = self.consolidation_fault = lambda request: None


# Each fault, and the words the failure's reason must contain.

# --- HTTP helpers -----------------------------------------------------------------------------------------




def operation(http: httpx.Client, bank_id: str, operation_id: str) -> dict[str, Any]:
    response = http.get(f"{API}/{bank_id}/operations/{operation_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_terminal(http: httpx.Client, bank_id: str, operation_id: str, timeout: float = 60) -> dict[str, Any]:
    return wait_for(lambda: (op := operation(http, bank_id, operation_id))["status"] in TERMINAL and op,
                    f"operation {operation_id} to end", timeout)


def operations(http: httpx.Client, bank_id: str, kind: str, status: str | None = None) -> list[dict[str, Any]]:
    params = {"type": kind, "limit": 100, **({"status": status} if status else {})}
    response = http.get(f"{API}/{bank_id}/operations", params=params)
    assert response.status_code == 200, response.text
    return response.json()["operations"]


def retry(http: httpx.Client, bank_id: str, operation_id: str) -> dict[str, Any]:
    response = http.post(f"{API}/{bank_id}/operations/{operation_id}/retry")
    assert response.status_code == 200, response.text
    done = wait_terminal(http, bank_id, operation_id)
    assert done["status"] == "completed", done
    assert done["error_message"] is None
    return done


def retain(http: httpx.Client, bank_id: str, text: str, *, wait: bool = True) -> httpx.Response:
    return http.post(f"{API}/{bank_id}/memories", json={"items": [{"content": text}], "async": not wait})


def retain_async(http: httpx.Client, bank_id: str, text: str) -> str:
    response = retain(http, bank_id, text, wait=False)
    assert response.status_code == 200, response.text
    return response.json()["operation_id"]


def memories(http: httpx.Client, bank_id: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        response = http.get(f"{API}/{bank_id}/memories/list", params={**params, "limit": 1000, "offset": len(found)})
        assert response.status_code == 200, response.text
        page = response.json()
        found += page["items"]
        if len(found) >= page["total"] or not page["items"]:
            return found


def facts(http: httpx.Client, bank_id: str) -> list[str]:
    return sorted(m["text"] for m in memories(http, bank_id) if m["fact_type"] != "observation")


def observations(http: httpx.Client, bank_id: str) -> list[dict[str, Any]]:
    return memories(http, bank_id, type="observation")


def assert_stats_consistent(http: httpx.Client, bank_id: str) -> dict[str, Any]:
    """The stats agree with the memory list: node counts by type, and the consolidation states."""
    stats = http.get(f"{API}/{bank_id}/stats").json()
    listed = memories(http, bank_id)
    assert stats["total_nodes"] == len(listed), (stats, len(listed))
    assert stats["nodes_by_fact_type"] == dict(Counter(m["fact_type"] for m in listed))
    assert stats["total_observations"] == sum(m["fact_type"] == "observation" for m in listed)
    for state in ("pending", "failed"):
        shown = sum(len(memories(http, bank_id, type=kind, consolidation_state=state))
                    for kind in ("world", "experience"))
        assert stats[f"{state}_consolidation"] == shown, (state, stats, shown)
    return stats


def assert_one_observation_per_fact(http: httpx.Client, bank_id: str) -> None:
    """Every fact consolidated, cited by exactly one observation: nothing lost, nothing doubled."""
    found = observations(http, bank_id)
    cited = Counter(source for o in found for source in o["source_memory_ids"])
    fact_ids = {m["id"] for m in memories(http, bank_id) if m["fact_type"] != "observation"}
    assert set(cited) == fact_ids, "every fact has its observation, and no observation cites a stranger"
    assert set(cited.values()) == {1}, f"an observation was written twice: {cited}"
    assert len({o["text"] for o in found}) == len(found)
    assert all(m["consolidated_at"] for m in memories(http, bank_id, type="world"))


def assert_nothing_lost_or_doubled(http: httpx.Client, bank_id: str) -> dict[str, Any]:
    """One observation per fact and stats that agree with the memory list; returns the stats."""
    assert_one_observation_per_fact(http, bank_id)
    return assert_stats_consistent(http, bank_id)


def consolidation_id(http: httpx.Client, bank_id: str) -> str:
    (job,) = operations(http, bank_id, "consolidation")
    return job["id"]


def wait_for_llm_call(llm: ScriptedLLM, marker: str) -> None:
    wait_for(lambda: any(marker in r.user_text for r in list(llm.requests)), f"an LLM call about {marker}")
