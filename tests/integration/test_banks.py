"""Banks and their config over HTTP: create, update, list, delete; config overrides resolve over the
environment's defaults; bad keys and values are refused with the field named, and nothing is saved."""

from __future__ import annotations

import httpx


def test_create_update_list_and_delete_a_bank(http: httpx.Client, bank_id: str) -> None:
    created = http.put(f"/v1/default/banks/{bank_id}", json={"name": "Support bot", "mission": "help users"})
    assert created.status_code == 200, created.text
    assert created.json()["name"] == "Support bot"
    assert created.json()["disposition"] == {"skepticism": 3, "literalism": 3, "empathy": 3}

    updated = http.patch(f"/v1/default/banks/{bank_id}", json={"disposition": {"skepticism": 5, "literalism": 2,
                                                                              "empathy": 4}})
    assert updated.json()["name"] == "Support bot", "a PATCH keeps what it does not mention"
    assert updated.json()["disposition"] == {"skepticism": 5, "literalism": 2, "empathy": 4}

    listed = http.get("/v1/default/banks", params={"q": bank_id}).json()
    assert [b["bank_id"] for b in listed["banks"]] == [bank_id]
    assert listed["total"] == 1

    assert http.delete(f"/v1/default/banks/{bank_id}").json()["success"] is True
    assert http.get(f"/v1/default/banks/{bank_id}/config").status_code == 404
    assert http.delete(f"/v1/default/banks/{bank_id}").status_code == 404


def test_config_overrides_accept_field_and_env_names(http: httpx.Client, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={})
    response = http.patch(
        f"/v1/default/banks/{bank_id}/config",
        json={"updates": {"retain_chunk_size": 1200, "HINDSIGHT_API_RECALL_BUDGET_FIXED_LOW": 50}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["overrides"] == {"retain_chunk_size": 1200, "recall_budget_fixed_low": 50}
    assert body["config"]["retain_chunk_size"] == 1200
    assert body["config"]["recall_budget_fixed_mid"] == 300, "unset keys keep the environment default"

    reset = http.delete(f"/v1/default/banks/{bank_id}/config").json()
    assert reset["overrides"] == {}
    assert reset["config"]["retain_chunk_size"] == 3000


def test_unknown_or_mistyped_config_keys_are_refused_and_nothing_is_saved(http: httpx.Client, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={})
    unknown = http.patch(
        f"/v1/default/banks/{bank_id}/config",
        json={"updates": {"retain_chunk_size": 900, "retain_chunk_sise": 1, "no_such_thing": True}},
    )
    assert unknown.status_code == 400
    assert "retain_chunk_sise" in unknown.json()["detail"] and "no_such_thing" in unknown.json()["detail"]

    mistyped = http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_observations": "yes"}})
    assert mistyped.status_code == 400
    assert mistyped.json()["field"] == "updates.enable_observations"

    assert http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"] == {}


def test_stats_count_what_the_bank_holds(http: httpx.Client, bank_id: str) -> None:
    http.post(
        f"/v1/default/banks/{bank_id}/memories",
        json={"items": [{"content": "Alice works at Google in Mountain View. She loves hiking in Yosemite."}]},
    ).raise_for_status()
    stats = http.get(f"/v1/default/banks/{bank_id}/stats").json()
    assert stats["total_documents"] == 1
    assert stats["nodes_by_fact_type"]["world"] == stats["total_nodes"] >= 2
    assert stats["failed_operations"] == 0


def test_missing_bank_answers_404(http: httpx.Client) -> None:
    response = http.get("/v1/default/banks/never-created/stats")
    assert response.status_code == 404
    assert "never-created" in response.json()["detail"]
