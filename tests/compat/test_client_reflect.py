"""The official hindsight-client against Engram for reflect, mental models, directives and
observations (consolidate, clear, recall of observations), unchanged."""

from __future__ import annotations

import time

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.models.consolidation_request import ConsolidationRequest

from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM


def agent(request):
    if request.schema_name == "ExtractionOutput":
        text = request.user_text.split("Text:\n", 1)[1].strip()
        return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}
    if request.schema_name == "ConsolidationActions":
        return {"creates": [{"text": "The user is learning Portuguese", "evidence": [{"fact": "F1", "quote": "Portuguese"}]}]}
    return Reply.tool_calls([("done", {"answer": "The user is learning Portuguese."})])


@pytest.fixture
def client(llm_server: RunningServer, llm: ScriptedLLM):
    llm.handler = agent
    with Hindsight(base_url=llm_server.url) as hindsight:
        yield hindsight


def wait_idle(client: Hindsight, bank_id: str) -> None:
    deadline = time.monotonic() + 30
    while _run_async(client.banks.get_agent_stats(bank_id)).pending_operations:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_reflect_mental_models_and_directives(client: Hindsight, bank_id: str) -> None:
    client.create_bank(bank_id)
    client.retain(bank_id, "The user takes Portuguese lessons every Tuesday.")
    directive = client.create_directive(bank_id, name="short", content="Answer briefly.", priority=3)
    assert directive.name == "short"
    assert [d.name for d in client.list_directives(bank_id).items] == ["short"]

    answer = client.reflect(bank_id, "What is the user learning?", include_facts=True)
    assert answer.text == "The user is learning Portuguese."
    assert [d.name for d in answer.based_on.directives] == ["short"]

    created = client.create_mental_model(bank_id, name="Studies", source_query="What is the user studying?",
                                         id="studies")
    assert created.mental_model_id == "studies"
    wait_idle(client, bank_id)
    model = client.get_mental_model(bank_id, "studies")
    assert model.content == "The user is learning Portuguese."
    refreshed = client.refresh_mental_model(bank_id, "studies")
    assert refreshed.operation_id
    wait_idle(client, bank_id)


def test_consolidation_and_observations_through_the_client(client: Hindsight, bank_id: str) -> None:
    client.create_bank(bank_id)
    client.update_bank_config(bank_id, enable_auto_consolidation=False)
    client.retain(bank_id, "The user practises Portuguese verbs daily.")
    queued = _run_async(client.banks.trigger_consolidation(bank_id, consolidation_request=ConsolidationRequest()))
    assert queued.operation_id
    wait_idle(client, bank_id)
    observations = client.recall(bank_id, "Portuguese", types=["observation"]).results
    assert [o.text for o in observations] == ["The user is learning Portuguese"]
    assert observations[0].source_fact_ids

    cleared = _run_async(client.banks.clear_observations(bank_id))
    assert cleared.success
    assert client.recall(bank_id, "Portuguese", types=["observation"]).results == []
