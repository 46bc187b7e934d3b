"""`/metrics`: Prometheus text with request latency per route, operations by status, LLM calls and tokens."""

from __future__ import annotations

import re

from tests.conftest import RunningServer
from tests.support.scripted_llm import ScriptedLLM


def test_metrics_count_requests_operations_and_llm_tokens(llm_server: RunningServer, llm: ScriptedLLM,
                                                         bank_id: str) -> None:
    llm.handler = lambda request: {"facts": [{"what": "The user owns a kayak.", "entities": ["user"]}]}
    with llm_server.client() as client:
        client.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_auto_consolidation": False}})
        client.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "kayak"}]}).raise_for_status()
        client.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "x"}], "async": True})
        text = client.get("/metrics").text
    route = "/v1/default/banks/{bank_id}/memories"
    count = re.search(rf'engram_http_request_duration_seconds_count{{method="POST",route="{re.escape(route)}",'
                      rf'status="200"}} (\d+)', text)
    assert count and int(count.group(1)) >= 2, "latency is recorded per route template, not per bank"
    assert bank_id not in text
    assert re.search(r'engram_llm_calls_total{outcome="ok",provider="openai"} [1-9]', text)
    assert re.search(r'engram_llm_tokens_total{kind="input",provider="openai"} [1-9]', text)
    assert re.search(r'engram_operations{type="retain",status="\w+"} [1-9]', text)
