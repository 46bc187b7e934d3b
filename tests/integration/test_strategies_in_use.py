"""Consolidation strategies as consolidation really reads them: from `HINDSIGHT_API_CONSOLIDATION_STRATEGIES`
(malformed entries dropped, an unknown tags_match read as "all"), shown by the preview of the configured
strategies, and the preview's 10,000-scope scan over a real bank."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import asyncpg
import pytest

from tests.conftest import RunningServer, separate_database, start_server
from tests.integration.test_consolidation_policies import (
    PolicyScript,
    consolidation_requests,
    create_each_fact,
    retain,
)
from tests.support.scripted_llm import ScriptedLLM

ENV_STRATEGIES = [
    # 0: a cap that is not an integer: malformed, dropped whole (it would claim every user:* scope)
    {"scopes": [{"tags": ["user:*"]}], "observations_mission": "MALFORMED-MISSION", "max_observations_per_scope": "3"},
    # 1: "scope" for "scopes": malformed, dropped
    {"scope": [{"tags": ["user:*"]}], "observations_mission": "TYPO-MISSION"},
    # 2: an unknown tags_match: kept, read as "all" (so extra tags are allowed)
    {"scopes": [{"tags": ["team:*"], "tags_match": "exactly"}], "observations_mission": "TEAM-MISSION"},
    # 3: well formed
    {"scopes": [{"tags": ["user:*"]}], "observations_mission": "USER-MISSION"},
]


@pytest.fixture(scope="module")
def env_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    env = {**scripted_llm.settings_env(), "ENGRAM_LLM_MAX_RETRIES": "0", "ENGRAM_LLM_TIMEOUT": "5",
           "HINDSIGHT_API_CONSOLIDATION_STRATEGIES": json.dumps(ENV_STRATEGIES),
           "HINDSIGHT_API_OBSERVATIONS_MISSION": "ENV-BANK-MISSION"}
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, env, name="env-strategies")
        yield running
        running.stop()


def test_env_strategies_are_read_leniently_in_consolidation_and_the_preview_says_how(
    env_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    script = PolicyScript(llm)
    script.decide = create_each_fact()
    with env_server.client() as http:
        retain(http, bank_id, "Bob likes chess.", tags=["user:bob"])
        retain(http, bank_id, "Dana runs the exec team.", tags=["team:exec", "user:dana"])
        retain(http, bank_id, "The office has a rooftop garden.")
        prompts = {r.user_text.splitlines()[0]: r.system_prompt for r in consolidation_requests(llm)}
        assert set(prompts) == {"Scope: user:bob", "Scope: team:exec, user:dana", "Scope: (global, untagged)"}
        assert "USER-MISSION" in prompts["Scope: user:bob"], "the malformed entries before it were dropped"
        assert not any(word in prompt for prompt in prompts.values() for word in ("MALFORMED", "TYPO"))
        assert "TEAM-MISSION" in prompts["Scope: team:exec, user:dana"], "'exactly' acted as 'all'"
        assert "ENV-BANK-MISSION" in prompts["Scope: (global, untagged)"]

        configured = http.post(f"/v1/default/banks/{bank_id}/consolidation-strategies/preview", json={})
        assert configured.status_code == 200, configured.text
        body = configured.json()
        assert body["source"] == "configured"
        assert [d["index"] for d in body["dropped"]] == [0, 1]
        assert "max_observations_per_scope" in body["dropped"][0]["problem"]
        assert "did you mean 'scopes'" in body["dropped"][1]["problem"]
        assert [r["index"] for r in body["relaxed"]] == [2] and "tags_match" in body["relaxed"][0]["problem"]
        claimed = [[s["tags"] for rule in strategy["rules"] for s in rule["samples"] if s["handled_by"] == i]
                   for i, strategy in enumerate(body["strategies"])]
        assert claimed == [[["team:exec", "user:dana"]], [["user:bob"]]], "what consolidation itself used"
        assert body["default"]["samples"] == [{"tags": [], "count": 1, "handled_by": None}]

        draft = http.post(f"/v1/default/banks/{bank_id}/consolidation-strategies/preview",
                          json={"strategies": ENV_STRATEGIES})
        assert draft.status_code == 400 and draft.json()["field"] == "strategies[0].max_observations_per_scope"


async def add_scopes(dsn: str, bank_id: str, count: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id) VALUES ($1) ON CONFLICT DO NOTHING", bank_id)
        await conn.execute(
            "INSERT INTO memory_units (id, bank_id, text, fact_type, embedding, tags)"
            " SELECT gen_random_uuid(), $1, 'observation ' || g, 'observation',"
            "        array_fill(0.1::real, ARRAY[384])::vector, ARRAY['session:' || g]"
            " FROM generate_series(1, $2) g",
            bank_id, count,
        )
    finally:
        await conn.close()


async def drop_one_scope(dsn: str, bank_id: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DELETE FROM memory_units WHERE bank_id = $1 AND tags = ARRAY['session:1']", bank_id)
    finally:
        await conn.close()


def test_the_preview_scans_at_most_10000_scopes(isolated_dsn: str, bank_id: str) -> None:
    # A database of its own: 10,001 rows in the shared one would sit in every other test's vector index.
    server = start_server(isolated_dsn, name="many-scopes")
    draft = {"strategies": [{"scopes": [{"tags": ["session:*"]}], "observations_mission": "Sessions."}],
             "sample_limit": 1}
    try:
        asyncio.run(add_scopes(isolated_dsn, bank_id, 10_001))
        with server.client() as http:
            over = http.post(f"/v1/default/banks/{bank_id}/consolidation-strategies/preview", json=draft).json()
            assert over["scopes_scanned"] == 10_000 and over["complete"] is False
            assert over["strategies"][0]["claimed_count"] == 10_000, "counts are lower bounds"
            asyncio.run(drop_one_scope(isolated_dsn, bank_id))
            exact = http.post(f"/v1/default/banks/{bank_id}/consolidation-strategies/preview", json=draft).json()
            assert exact["scopes_scanned"] == 10_000 and exact["complete"] is True
            scopes = http.get(f"/v1/default/banks/{bank_id}/observations/scopes", params={"limit": 1}).json()
            assert scopes["total"] == 10_000
    finally:
        server.stop()
