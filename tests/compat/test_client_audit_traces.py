"""The official `hindsight-client==1.1.0` on the audit log (its `audit` API) and LLM traces (its
generated `LLMTracesApi`, which the high-level client does not expose), against a server with both on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hindsight_client_api.api.llm_traces_api import LLMTracesApi

from tests.compat.test_hindsight_client import ThreadedClient
from tests.conftest import start_server
from tests.support.scripted_llm import ScriptedLLM


@pytest.fixture
def client(isolated_dsn: str, llm: ScriptedLLM) -> Iterator[ThreadedClient]:
    env = {**llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "ENGRAM_AUDIT_LOG_ENABLED": "true",
           "ENGRAM_LLM_TRACE_ENABLED": "true"}
    running = start_server(isolated_dsn, env, name="audit-client")
    hindsight = ThreadedClient(running.url)
    yield hindsight
    hindsight.close()
    running.stop()


def test_audit_log_and_traces_through_the_client(client: ThreadedClient, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = lambda request: {"facts": [{"what": "Vera climbs.", "fact_type": "world", "entities": ["Vera"]}]}
    client.create_bank(bank_id)
    client.update_bank_config(bank_id, enable_observations=False)
    client.retain(bank_id, "Vera climbs in the Dolomites.")

    logs = client.run(client.audit.list_audit_logs(bank_id))
    assert [e.action for e in logs.items][:1] == ["retain"] and logs.total >= 3
    entry = client.run(client.audit.get_audit_log(bank_id, logs.items[0].id))
    assert entry.request["body"]["items"][0]["content"] == "Vera climbs in the Dolomites."
    stats = client.run(client.audit.audit_log_stats(bank_id, period="1d"))
    assert sum(b.total for b in stats.buckets) == logs.total

    traces = LLMTracesApi(client._api_client)
    listed = client.run(traces.list_llm_requests(bank_id))
    assert [(e.operation, e.scope, e.status) for e in listed.items] == [("retain", "ExtractionOutput", "success")]
    counted = client.run(traces.llm_request_stats(bank_id, period="1d"))
    assert sum(b.total for b in counted.buckets) == 1 and sum(b.tokens.total for b in counted.buckets) == 15
