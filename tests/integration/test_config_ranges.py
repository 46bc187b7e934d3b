"""Bank settings have typed ranges, one schema for the config API, bank PUT, templates and the
environment: a value outside its range is a 400 naming the key and is never stored; a value stored
by an older version that is now invalid is ignored (the default is used, GET …/config says so)
instead of breaking reads; and no chunk size, however stored, can hang the server."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, _admin, start_server

BANKS = "/v1/default/banks"
PROSE = " ".join(f"Sentence number {n} says that the harbour office opened gate {n} at dawn." for n in range(60))


def config_path(bank_id: str) -> str:
    return f"{BANKS}/{bank_id}/config"


def refused(response: httpx.Response, field: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["field"] == field, body
    return body


def refused_by_schema_or_range(response: httpx.Response, field: str) -> None:
    """A 422 whose location is the field (the request model's own bound, as in Hindsight), or a 400
    naming it (the settings schema's range)."""
    if response.status_code == 422:
        locations = [".".join(str(p) for p in error["loc"][1:]) for error in response.json()["detail"]]
        assert field in locations, response.text
    else:  # the 400 names it the way every 400 does: items[0].field
        refused(response, re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", field))


def store_overrides(dsn: str, bank_id: str, overrides: str) -> None:
    """Write overrides straight into the table, as an older version (with no ranges) could have."""
    _admin(dsn, f"UPDATE banks SET config = '{overrides}'::jsonb WHERE bank_id = '{bank_id}'")


# --- the API refuses what the schema refuses ---------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("retain_chunk_size", -1),
    ("retain_chunk_size", 0),
    ("retain_chunk_size", 2**70),
    ("disposition_skepticism", 99),
    ("disposition_literalism", -3),
    ("recall_budget_fixed_mid", -5),
    ("consolidation_dedup_threshold", -5),
    ("consolidation_dedup_threshold", 1e308),
    ("mcp_enabled_tools", ["bogus"]),
    ("retain_extraction_mode", "fancy"),
    ("recall_budget_function", "linear"),
    ("HINDSIGHT_API_DISPOSITION_EMPATHY", 6),
])
def test_a_value_outside_its_range_is_400_naming_the_key(http: httpx.Client, bank_id: str, key: str,
                                                         value: Any) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    name = key.removeprefix("HINDSIGHT_API_").lower()
    body = refused(http.patch(config_path(bank_id), json={"updates": {key: value}}), f"updates.{name}")
    assert any(words in body["detail"] for words in ("must be", "unknown value", "beyond the 64-bit")), body
    assert http.get(config_path(bank_id)).json()["overrides"] == {}, "nothing was saved"


def test_the_published_schema_is_what_the_api_enforces(http: httpx.Client, bank_id: str) -> None:
    """Every bound of GET /v1/bank-config-schema is accepted exactly at the bound and refused past it,
    and every enum value is accepted while any other string is refused."""
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    schema = http.get("/v1/bank-config-schema").json()["properties"]
    assert schema["disposition_skepticism"]["minimum"] == 1 and schema["disposition_skepticism"]["maximum"] == 5
    assert schema["retain_chunk_size"]["default"] == 3000
    assert "sync_retain" in schema["mcp_enabled_tools"]["items"]["enum"]
    checked = 0
    for key, prop in schema.items():
        integer = "integer" in prop["type"]
        step = 1 if integer else 1e-6
        accepted, rejected = [], []
        if "minimum" in prop:
            accepted.append(prop["minimum"])
            rejected.append(prop["minimum"] - step)
        if "exclusiveMinimum" in prop:
            rejected.append(prop["exclusiveMinimum"])
        if "maximum" in prop:
            accepted.append(prop["maximum"])
            rejected.append(prop["maximum"] + step)
        if "enum" in prop:
            accepted.extend(v for v in prop["enum"] if v is not None)
            rejected.append("surely-not-a-choice")
        for value in accepted:
            response = http.patch(config_path(bank_id), json={"updates": {key: value}})
            assert response.status_code == 200, (key, value, response.text)
            checked += 1
        for value in rejected:
            refused(http.patch(config_path(bank_id), json={"updates": {key: value}}), f"updates.{key}")
            checked += 1
    assert checked > 60
    http.delete(config_path(bank_id)).raise_for_status()


def test_bank_put_refuses_out_of_range_dispositions_and_settings(http: httpx.Client, bank_id: str) -> None:
    bank = f"{BANKS}/{bank_id}"
    refused_by_schema_or_range(http.put(bank, json={"disposition": {"skepticism": 99, "literalism": 3, "empathy": 3}}),
                               "disposition.skepticism")
    refused_by_schema_or_range(http.put(bank, json={"disposition_literalism": -3}), "disposition_literalism")
    refused_by_schema_or_range(http.patch(bank, json={"disposition_empathy": 0}), "disposition_empathy")
    refused(http.put(bank, json={"retain_chunk_size": 2**70}), "retain_chunk_size")
    refused(http.put(bank, json={"retain_extraction_mode": "fancy"}), "retain_extraction_mode")
    assert http.get(config_path(bank_id)).status_code == 404, "no bank was created"


def test_templates_refuse_out_of_range_settings_naming_the_key(http: httpx.Client, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    manifest = {"version": "1", "bank": {"retain_mission": "Ports", "retain_chunk_size": 0}}
    for dry_run in ("true", "false"):
        refused(http.post(f"{BANKS}/{bank_id}/import", params={"dry_run": dry_run}, json=manifest),
                "bank.retain_chunk_size")
    assert http.get(config_path(bank_id)).json()["overrides"] == {}, "nothing of the manifest was applied"
    oversized = {"version": "1", "mental_models": [{"id": "m", "name": "M", "source_query": "?", "max_tokens": 2**70}]}
    refused_by_schema_or_range(http.post(f"{BANKS}/{bank_id}/import", json=oversized), "mental_models.0.max_tokens")
    manifest["bank"]["retain_chunk_size"] = 1200
    http.post(f"{BANKS}/{bank_id}/import", json=manifest).raise_for_status()
    assert http.get(config_path(bank_id)).json()["overrides"] == {"retain_mission": "Ports", "retain_chunk_size": 1200}


def test_strategies_use_the_same_ranges_as_the_bank_wide_settings(http: httpx.Client, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
    strategies = [{"scopes": [{"tags": ["team"]}], "max_observations_per_scope": -7}]
    refused(http.patch(config_path(bank_id), json={"updates": {"consolidation_strategies": strategies}}),
            "updates.consolidation_strategies[0].max_observations_per_scope")
    retain_strategies = {"fast": {"retain_chunk_size": -1, "some_hindsight_only_key": 1}}
    refused(http.patch(config_path(bank_id), json={"updates": {"retain_strategies": retain_strategies}}),
            "updates.retain_strategies.fast.retain_chunk_size")
    retain_strategies["fast"]["retain_chunk_size"] = 800
    assert http.patch(config_path(bank_id), json={"updates": {"retain_strategies": retain_strategies}}).is_success


# --- values stored before ranges existed -------------------------------------------------------


def test_stored_invalid_values_are_ignored_not_fatal(http: httpx.Client, pg_dsn: str, bank_id: str) -> None:
    http.put(f"{BANKS}/{bank_id}", json={"name": "Harbour"}).raise_for_status()
    http.post(f"{BANKS}/{bank_id}/memories", json={"items": [{"content": "The harbour office opens at dawn."}]}
              ).raise_for_status()
    store_overrides(pg_dsn, bank_id, '{"disposition_skepticism": 99, "disposition_literalism": -3, '
                    '"recall_budget_fixed_mid": -5, "consolidation_dedup_threshold": 1e308, '
                    '"mcp_enabled_tools": ["bogus"], "retain_mission": "Ports"}')

    listed = http.get(BANKS)
    assert listed.status_code == 200, listed.text
    mine = next(b for b in listed.json()["banks"] if b["bank_id"] == bank_id)
    assert mine["disposition"] == {"skepticism": 3, "literalism": 3, "empathy": 3}
    profile = http.put(f"{BANKS}/{bank_id}", json={"name": "Harbour office"})
    assert profile.status_code == 200, profile.text
    assert profile.json()["disposition"]["skepticism"] == 3

    config = http.get(config_path(bank_id)).json()
    assert config["config"]["disposition_skepticism"] == 3
    assert config["config"]["recall_budget_fixed_mid"] == 300
    assert config["config"]["consolidation_dedup_threshold"] == 0.97
    assert config["config"]["mcp_enabled_tools"] is None
    assert config["config"]["retain_mission"] == "Ports", "valid overrides still apply"
    assert config["overrides"]["disposition_skepticism"] == 99, "the stored value is shown as stored"
    invalid = config["invalid_overrides"]
    assert set(invalid) == {"disposition_skepticism", "disposition_literalism", "recall_budget_fixed_mid",
                            "consolidation_dedup_threshold", "mcp_enabled_tools"}
    assert "ignored" in invalid["recall_budget_fixed_mid"] and "between 1 and" in invalid["recall_budget_fixed_mid"]

    recall = http.post(f"{BANKS}/{bank_id}/memories/recall", json={"query": "When does the harbour office open?"})
    assert recall.status_code == 200, recall.text
    assert recall.json()["results"], "recall runs with the default budget"

    exported = http.get(f"{BANKS}/{bank_id}/export").json()
    assert exported["bank"] == {"retain_mission": "Ports"}, "only the settings in effect are exported"
    assert http.post(f"{BANKS}/{bank_id}/import", json=exported).status_code == 200

    fixed = http.patch(config_path(bank_id), json={"updates": {"recall_budget_fixed_mid": 50}})
    assert "recall_budget_fixed_mid" not in fixed.json()["invalid_overrides"], "a valid value replaces it"


def _retain_beside_health(server: RunningServer, bank_id: str, timeout: float) -> tuple[Any, list[Any]]:
    """Retain on one thread while /health is probed on another; both with timeouts, so a hang fails."""
    outcome: dict[str, Any] = {}

    def retain() -> None:
        try:
            outcome["retain"] = httpx.post(f"{server.url}{BANKS}/{bank_id}/memories", timeout=timeout,
                                           json={"items": [{"content": PROSE, "document_id": "harbour"}]})
        except httpx.HTTPError as exc:
            outcome["retain"] = exc

    thread = threading.Thread(target=retain)
    thread.start()
    probes: list[Any] = []
    while thread.is_alive() and len(probes) < 20:
        try:
            probes.append(httpx.get(f"{server.url}/health", timeout=5).status_code)
        except httpx.HTTPError as exc:
            probes.append(exc)
        time.sleep(0.2)
    thread.join(timeout + 5)
    return outcome.get("retain"), probes


def test_no_chunk_size_can_hang_the_server(isolated_dsn: str, bank_id: str) -> None:
    running = start_server(isolated_dsn, name="chunk-size")
    try:
        with running.client() as http:
            http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
            store_overrides(isolated_dsn, bank_id, '{"retain_chunk_size": -1}')  # saved by an older version

            retained, probes = _retain_beside_health(running, bank_id, timeout=20)
            assert isinstance(retained, httpx.Response) and retained.status_code == 200, retained
            assert all(probe == 200 for probe in probes), f"/health while retaining: {probes}"
            chunks = http.get(f"{BANKS}/{bank_id}/documents/harbour/chunks").json()["items"]
            assert len(chunks) == 2, "chunked with the default 3000 characters"

            queued = http.post(f"{BANKS}/{bank_id}/memories", json={
                "async": True, "items": [{"content": PROSE, "document_id": "harbour-async"}]}).json()

            def finished() -> str | None:
                status = http.get(f"{BANKS}/{bank_id}/operations/{queued['operation_id']}").json()["status"]
                return status if status in ("completed", "failed") else None

            deadline = time.monotonic() + 30
            while (status := finished()) is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert status == "completed"

            refused(http.patch(config_path(bank_id), json={"updates": {"retain_chunk_size": -1}}),
                    "updates.retain_chunk_size")
            assert "retain_chunk_size" in running.log(), "the ignored stored value is logged"
    finally:
        running.stop()


def test_out_of_range_environment_values_keep_the_default(isolated_dsn: str, bank_id: str) -> None:
    env = {"ENGRAM_RETAIN_CHUNK_SIZE": "-1", "HINDSIGHT_API_DISPOSITION_SKEPTICISM": "99",
           "ENGRAM_CONSOLIDATION_DEDUP_THRESHOLD": "1e308", "ENGRAM_RECALL_BUDGET_FIXED_MID": "600",
           "ENGRAM_MCP_ENABLED_TOOLS": '["bogus"]'}
    running = start_server(isolated_dsn, env, name="env-ranges")
    try:
        with running.client() as http:
            http.put(f"{BANKS}/{bank_id}", json={}).raise_for_status()
            config = http.get(config_path(bank_id)).json()["config"]
            assert config["retain_chunk_size"] == 3000
            assert config["disposition_skepticism"] == 3
            assert config["consolidation_dedup_threshold"] == 0.97
            assert config["mcp_enabled_tools"] is None
            assert config["recall_budget_fixed_mid"] == 600, "a valid environment value applies"
        log = running.log()
        assert "ENGRAM_RETAIN_CHUNK_SIZE" in log and "between 50 and" in log, log[-2000:]
    finally:
        running.stop()
