"""Observation scopes and the strategies preview over HTTP: existing scopes are listed with their counts
(paged, `[]` for the global scope); a draft strategies list is previewed against them without being
saved; malformed strategies are refused with the offending entry named, while the env var is not
validated that way."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import start_server

EMBEDDING = "[" + ",".join(["1"] + ["0"] * 383) + "]"
SCOPES = {
    ("user:dana",): 4,
    ("company:acme",): 3,
    ("company:globex",): 2,
    ("company:acme", "team:exec"): 1,
    (): 1,
}
SEED_STRATEGIES = [
    {"scopes": [{"tags": ["company:acme"]}], "max_observations_per_scope": 5},
    {"scopes": [{"tags": ["company:*"]}], "observations_mission": "Record only general trends."},
]


async def add_observations(pg_dsn: str, bank_id: str, scopes: dict[tuple[str, ...], int]) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id) VALUES ($1) ON CONFLICT DO NOTHING", bank_id)
        for tags, count in scopes.items():
            for n in range(count):
                await conn.execute(
                    "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, tags)"
                    " VALUES ($1, $2, $3, 'observation', $4::vector, $5)",
                    # multi-tag rows stored out of order and repeated still list as one sorted scope
                    uuid.uuid4(), bank_id, f"observation {n} of {tags}", EMBEDDING, list(reversed(tags)) * 2,
                )
        # a raw fact is not an observation: its tags are no scope
        await conn.execute(
            "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, tags)"
            " VALUES ($1, $2, 'a fact', 'world', $3::vector, $4)",
            uuid.uuid4(), bank_id, EMBEDDING, ["user:zed"],
        )
    finally:
        await conn.close()


@pytest.fixture
async def scoped_bank(http: httpx.Client, pg_dsn: str, bank_id: str) -> str:
    await add_observations(pg_dsn, bank_id, SCOPES)
    return bank_id


def scopes_url(bank_id: str) -> str:
    return f"/v1/default/banks/{bank_id}/observations/scopes"


def preview_url(bank_id: str) -> str:
    return f"/v1/default/banks/{bank_id}/consolidation-strategies/preview"


def test_scopes_are_listed_most_observations_first(http: httpx.Client, scoped_bank: str) -> None:
    body = http.get(scopes_url(scoped_bank)).json()
    assert body["total"] == 5
    assert (body["limit"], body["offset"]) == (100, 0)
    assert body["scopes"][:3] == [
        {"tags": ["user:dana"], "count": 4},
        {"tags": ["company:acme"], "count": 3},
        {"tags": ["company:globex"], "count": 2},
    ]
    assert {"tags": [], "count": 1} in body["scopes"], "the empty tag list is the global scope"
    assert {"tags": ["company:acme", "team:exec"], "count": 1} in body["scopes"]


def test_scopes_are_paged_with_the_total(http: httpx.Client, scoped_bank: str) -> None:
    first = http.get(scopes_url(scoped_bank), params={"limit": 2}).json()
    rest = http.get(scopes_url(scoped_bank), params={"limit": 2, "offset": 2}).json()
    beyond = http.get(scopes_url(scoped_bank), params={"limit": 2, "offset": 10}).json()
    assert [len(page["scopes"]) for page in (first, rest, beyond)] == [2, 2, 0]
    assert [page["total"] for page in (first, rest, beyond)] == [5, 5, 5]
    assert first["scopes"][0]["tags"] == ["user:dana"]
    assert rest["scopes"][0]["tags"] == ["company:globex"]


def test_unknown_bank_is_404(http: httpx.Client, bank_id: str) -> None:
    assert http.get(scopes_url(bank_id)).status_code == 404
    assert http.post(preview_url(bank_id), json={"strategies": []}).status_code == 404


def test_preview_reports_which_strategy_handles_each_scope(http: httpx.Client, scoped_bank: str) -> None:
    response = http.post(preview_url(scoped_bank), json={"strategies": SEED_STRATEGIES, "sample_limit": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    acme, companies = body["strategies"]
    # tags_match "all" lets other tags in: company:acme also claims company:acme+team:exec
    assert (acme["active"], acme["claimed_count"]) == (True, 2)
    assert acme["rules"][0]["samples"] == [{"tags": ["company:acme"], "count": 3, "handled_by": 0},
                                           {"tags": ["company:acme", "team:exec"], "count": 1, "handled_by": 0}]

    rule = companies["rules"][0]
    # company:* matches all three company scopes, but the first strategy takes both acme ones, whole
    assert (rule["match_count"], rule["taken_count"], rule["observation_count"]) == (3, 2, 6)
    assert companies["claimed_count"] == 1
    assert {tuple(s["tags"]): s["handled_by"] for s in rule["samples"]} == {
        ("company:acme",): 0, ("company:globex",): 1, ("company:acme", "team:exec"): 0}

    assert body["default"]["match_count"] == 2, "user:dana and the global scope"
    assert body["default"]["observation_count"] == 5
    assert (body["scopes_scanned"], body["complete"]) == (5, True)


@pytest.mark.parametrize(
    ("strategies", "field"),
    [
        ([{"scope": [{"tags": ["company:*"]}]}], "strategies[0].scope"),
        ([SEED_STRATEGIES[0], {"scopes": [{"tags": ["team:*"], "tags_match": "any"}]}],
         "strategies[1].scopes[0].tags_match"),
        ([{"scopes": [{"tags": "company:*"}], "observations_mission": "x"}], "strategies[0].scopes[0].tags"),
        ([{"scopes": [], "max_observations_per_scope": "5"}], "strategies[0].max_observations_per_scope"),
    ],
)
def test_preview_refuses_malformed_drafts_naming_the_entry(
    http: httpx.Client, scoped_bank: str, strategies: list[dict[str, Any]], field: str
) -> None:
    response = http.post(preview_url(scoped_bank), json={"strategies": strategies})
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


def test_preview_saves_nothing(http: httpx.Client, scoped_bank: str) -> None:
    before = http.get(f"/v1/default/banks/{scoped_bank}/config").json()["overrides"]
    assert http.post(preview_url(scoped_bank), json={"strategies": SEED_STRATEGIES}).status_code == 200
    after = http.get(f"/v1/default/banks/{scoped_bank}/config").json()
    assert after["overrides"] == before
    assert after["config"]["consolidation_strategies"] is None


def test_config_api_refuses_malformed_strategies_and_keeps_incomplete_ones(http: httpx.Client, bank_id: str) -> None:
    config_url = f"/v1/default/banks/{bank_id}/config"
    bad = http.patch(config_url, json={"updates": {"consolidation_strategies": [
        SEED_STRATEGIES[0], {"scopes": [{"tags": ["team:*"], "tags_match": "everything"}]}]}})
    assert bad.status_code == 400, bad.text
    assert bad.json()["field"] == "updates.consolidation_strategies[1].scopes[0].tags_match"

    typo = http.patch(config_url, json={"updates": {"consolidation_strategies": [{"scope": []}]}})
    assert typo.json()["field"] == "updates.consolidation_strategies[0].scope"

    limits = http.patch(config_url, json={"updates": {"observation_scope_limits": [{"tags": "team:*"}]}})
    assert limits.json()["field"] == "updates.observation_scope_limits[0].tags"

    # what the control plane saves while you type: a rule with no tags yet, a strategy with no setting
    incomplete = [{"scopes": [{"tags": []}], "observations_mission": "draft"}, {"scopes": [{"tags": ["team:*"]}]}]
    saved = http.patch(config_url, json={"updates": {"consolidation_strategies": incomplete}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"]["consolidation_strategies"] == incomplete


def test_env_strategies_are_not_validated_at_start(isolated_dsn: str, bank_id: str) -> None:
    raw = [{"scopes": [{"tags": ["company:*"]}], "observations_mission": "general trends"},
           {"scope": [{"tags": ["team:*"]}], "observations_mission": "typo'd key"}]
    running = start_server(isolated_dsn, {"ENGRAM_CONSOLIDATION_STRATEGIES": json.dumps(raw)}, name="env-strategies")
    try:
        with running.client() as client:
            assert client.put(f"/v1/default/banks/{bank_id}", json={}).status_code == 200
            config = client.get(f"/v1/default/banks/{bank_id}/config").json()["config"]
            # stored as given; the malformed entry is dropped when consolidation resolves it
            assert config["consolidation_strategies"] == raw
    finally:
        running.stop()
