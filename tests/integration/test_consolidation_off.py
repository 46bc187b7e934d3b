"""Stats say whether a bank's facts get consolidated at all: not with no LLM, not with observations
off for the bank; the reason names the setting that turns it on."""

from __future__ import annotations

import httpx

from tests.conftest import RunningServer


def _stats(server: RunningServer, bank_id: str) -> dict:
    response = httpx.get(f"{server.url}/v1/default/banks/{bank_id}/stats")
    assert response.status_code == 200, response.text
    return response.json()


def test_with_no_llm_consolidation_is_off_and_says_why(server: RunningServer, bank_id: str) -> None:
    httpx.post(f"{server.url}/v1/default/banks/{bank_id}/memories",
               json={"items": [{"content": "The orchard has forty apple trees."}]}).raise_for_status()
    stats = _stats(server, bank_id)
    assert stats["consolidation"] == {"enabled": False, "reason": "no LLM configured", "setting": "ENGRAM_LLM_PROVIDER"}
    assert stats["pending_consolidation"] == 1, "the count stays what it is; the state says it will not drain"


def test_with_an_llm_it_is_on_unless_the_bank_turns_observations_off(llm_server: RunningServer, bank_id: str) -> None:
    httpx.put(f"{llm_server.url}/v1/default/banks/{bank_id}", json={}).raise_for_status()
    assert _stats(llm_server, bank_id)["consolidation"] == {"enabled": True, "reason": None, "setting": None}
    httpx.patch(f"{llm_server.url}/v1/default/banks/{bank_id}/config",
                json={"updates": {"enable_observations": False}}).raise_for_status()
    assert _stats(llm_server, bank_id)["consolidation"] == {
        "enabled": False, "reason": "observations are off for this bank", "setting": "enable_observations"}
