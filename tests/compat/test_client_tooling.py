"""The official `hindsight-client==1.1.0` on the tooling and stats operations of issue 17: prompt
preview, the LLM probe, the memories time series, consolidation recovery, the dry-run refresh, the
retired profile and regenerate operations, the deprecated background and /version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models.add_background_request import AddBackgroundRequest
from hindsight_client_api.models.prompt_preview_request import PromptPreviewRequest

from tests.compat.test_hindsight_client import ThreadedClient
from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import wait_for


def agent(request):
    if request.schema_name == "ExtractionOutput":
        text = request.user_text.split("Text:\n", 1)[1].strip()
        return {"facts": [{"what": text, "fact_type": "world", "entities": ["user"]}]}
    if request.schema_name == "ConsolidationActions":
        return {"creates": []}
    if request.get("tools"):
        return Reply.tool_calls([("done", {"answer": f"answer #{len(request.messages)}-{request.user_text[-8:]}"})])
    return "ok"


@pytest.fixture
def client(llm_server: RunningServer, llm: ScriptedLLM) -> Iterator[ThreadedClient]:
    llm.handler = agent
    hindsight = ThreadedClient(llm_server.url)
    yield hindsight
    hindsight.close()


def idle(client: ThreadedClient, bank_id: str) -> None:
    wait_for(lambda: not client.run(client.banks.get_agent_stats(bank_id)).pending_operations, "operations")


def test_preview_probe_timeseries_and_recover(client: ThreadedClient, llm: ScriptedLLM, bank_id: str) -> None:
    client.create_bank(bank_id, reflect_mission="Answer as a gardener.")
    client.retain(bank_id, "The user grows tomatoes.")
    idle(client, bank_id)
    preview = client.run(client.banks.preview_prompt(bank_id, PromptPreviewRequest(operation="reflect")))
    system = preview.messages[0]
    assert system.role == "system"
    mission = [b for b in system.blocks if b.var_field == "reflect_mission"]
    assert [(b.source, b.text) for b in mission] == [("config", "Answer as a gardener.")]

    health = client.run(client.banks.test_bank_llm(bank_id))
    assert [(op.operation, op.ok, op.status) for op in health.operations] == [
        ("retain", True, "connected"), ("consolidation", True, "connected"), ("reflect", True, "connected")]

    series = client.run(client.banks.get_memories_timeseries(bank_id, period="1d"))
    assert series.trunc == "hour" and len(series.buckets) == 24
    assert sum(b.world + b.experience for b in series.buckets) == 1

    assert client.run(client.banks.recover_consolidation(bank_id)).retried_count == 0


def test_dry_run_refresh(client: ThreadedClient, bank_id: str) -> None:
    client.create_bank(bank_id)
    client.retain(bank_id, "The user grows basil.")
    client.create_mental_model(bank_id, name="Garden", source_query="What does the user grow?", id="garden")
    idle(client, bank_id)
    before = client.get_mental_model(bank_id, "garden").content
    dry = client.dry_run_refresh_mental_model(bank_id, "garden")
    assert dry.mental_model_id == "garden" and dry.current_content == before
    assert dry.candidate_content and dry.outcome in ("content_written", "content_unchanged")
    assert dry.would_persist is (dry.candidate_content != before)
    assert client.get_mental_model(bank_id, "garden").content == before


def test_retired_operations_background_and_version(client: ThreadedClient, bank_id: str) -> None:
    client.create_bank(bank_id, reflect_mission="Help with the garden.")
    with pytest.raises(ApiException) as gone:
        client.run(client.banks.get_bank_profile(bank_id))
    assert gone.value.status == 410 and "PATCH /v1/default/banks/{bank_id}/config" in gone.value.body
    with pytest.raises(ApiException) as regenerate:
        client.run(client.entities.regenerate_entity_observations(bank_id, "anything"))
    assert regenerate.value.status == 410

    background = client.run(client.banks.add_bank_background(bank_id, AddBackgroundRequest(content="Has a pond.")))
    assert background.mission == "Help with the garden.\nHas a pond."
    assert client.get_bank_config(bank_id)["config"]["reflect_mission"] == "Help with the garden.\nHas a pond."

    version = client.get_version()
    assert version.api_version == "1.1.0" and version.features.bank_llm_health is True
