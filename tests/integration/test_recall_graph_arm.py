"""The graph arm scores what its docstring says, computed here again in Python from the rows it reads:
a fact sharing entities with a seed gets the seed's similarity × tanh(0.5 · the summed weights of
every entity they share), the seed's hub entities included even though they are not walked; a fact
linked to a seed gets the seed's similarity × the link's weight; the best of those counts."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections import defaultdict

import asyncpg
import httpx
import numpy as np
import pytest

from engram.recall import arms
from engram.recall.filters import UnitFilter
from engram.recall.pipeline import ALL_TYPES, _graph_in_halves
from engram.store.spare import spare_connection
from tests.support.plans import Recording, plan_nodes

HUB_FACTS = 60  # "Acme" in this many facts weighs 2/√61 ≈ 0.26: a seed of 0.6 does not walk it alone


def retain(http: httpx.Client, bank_id: str, texts: list[str]) -> None:
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": t} for t in texts]})
    assert response.status_code == 200, response.text


def retain_lena_story(http: httpx.Client, bank_id: str) -> None:
    """A hub ("Acme", in HUB_FACTS + 3 facts) and Lena Brandt's facts, some naming the hub."""
    retain(http, bank_id, [f"Acme shipped crate number {n} to the harbour." for n in range(HUB_FACTS)])
    retain(http, bank_id, [
        "Lena Brandt joined Acme as a chemist.",
        "Lena Brandt won the Acme chess tournament.",
        "Lena Brandt repaired the Acme boiler in winter.",
        "Lena Brandt adopted a grey parrot.",
        "Lena Brandt climbed a volcano in Chile.",
        "Lena Brandt sings in a choir.",
        "Tax records list Lena Brandt under code 7741.",  # worded unlike the others: linked to none
    ])


def entity_weight(mentions: int) -> float:
    return min(1.0, 2.0 / math.sqrt(max(mentions, 1)))


async def expected_graph_scores(
    conn: asyncpg.Connection, bank_id: str, seeds: list[tuple[uuid.UUID, float]]
) -> tuple[dict[uuid.UUID, float], int, int]:
    """(each reachable fact's score by the rule in this module's docstring, how many reached facts got
    weight from an entity their seed did not walk, how many reached facts scored under the floor)."""
    named: dict[uuid.UUID, dict[uuid.UUID, float]] = defaultdict(dict)  # fact -> entity -> weight
    for row in await conn.fetch(
        "SELECT ue.unit_id, ue.entity_id, e.mention_count FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id"
        " WHERE ue.bank_id = $1", bank_id):
        named[row["unit_id"]][row["entity_id"]] = entity_weight(row["mention_count"])
    seed_ids = {seed for seed, _ in seeds}
    best: dict[uuid.UUID, float] = {}
    light_used = 0
    for seed, similarity in seeds:
        similarity = float(np.float32(similarity))  # the arm takes the seeds' scores as real
        lighter, walked = 0.0, set()
        for entity, weight in sorted(named[seed].items(), key=lambda item: (item[1], item[0])):
            lighter += weight
            if similarity * math.tanh(0.5 * lighter) >= arms.GRAPH_MIN_ACTIVATION - 1e-6:
                walked.add(entity)
        for fact, entities in named.items():
            if fact in seed_ids or not walked & entities.keys():
                continue
            shared = entities.keys() & named[seed].keys()
            light_used += bool(shared - walked)
            score = similarity * math.tanh(0.5 * sum(named[seed][e] for e in shared))
            best[fact] = max(best.get(fact, 0.0), score)
        for row in await conn.fetch(
            "SELECT CASE WHEN from_unit = $1 THEN to_unit ELSE from_unit END AS other, weight FROM memory_links"
            " WHERE (from_unit = $1 OR to_unit = $1) AND link_type IN ('semantic', 'causal')", seed):
            if row["other"] not in seed_ids:
                best[row["other"]] = max(best.get(row["other"], 0.0), similarity * row["weight"])
    floor = arms.GRAPH_MIN_ACTIVATION
    return ({fact: score for fact, score in best.items() if score >= floor}, light_used,
            sum(score < floor for score in best.values()))


# From a seed of 0.6 every fact naming Lena clears the activation floor; from 0.4 only those naming
# Acme too or linked to the seed do, and the arm must drop the tax record.
@pytest.mark.parametrize("seed_similarity", [0.6, 0.4])
async def test_the_graph_arm_adds_the_weight_of_hub_entities_it_does_not_walk(
    http: httpx.Client, bank_id: str, pg_dsn: str, seed_similarity: float
) -> None:
    retain_lena_story(http, bank_id)
    conn = await asyncpg.connect(pg_dsn)
    try:
        texts = {row["id"]: row["text"] for row in await conn.fetch(
            "SELECT id, text FROM memory_units WHERE bank_id = $1", bank_id)}
        seed = next(unit for unit, text in texts.items() if "chemist" in text)
        seeds = [(seed, seed_similarity)]
        expected, light_used, below_floor = await expected_graph_scores(conn, bank_id, seeds)
        assert light_used >= 2, "the story has facts that share an unwalked hub with the seed"
        assert below_floor >= (1 if seed_similarity < 0.5 else 0), "and, from a weak seed, facts under the floor"
        found = await arms.graph(conn, UnitFilter(bank_id, ALL_TYPES), seeds, 300)
    finally:
        await conn.close()

    assert {unit for unit, _ in found} == set(expected)
    for unit, score in found:
        assert math.isclose(score, expected[unit], abs_tol=1e-6), (texts[unit], score, expected[unit])
    ranked = [texts[unit] for unit, _ in found]
    assert not any("crate" in text for text in ranked), "a fact reached only through the hub is below the floor"
    acme_facts = [text for text in ranked if "Acme" in text]
    assert len(acme_facts) == 2 and ranked[:2] == acme_facts, "sharing the hub lifts a fact above those that do not"


async def test_the_graph_arm_in_two_halves_on_two_connections_ranks_as_the_whole(
    http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    """The recall runs the arm's seeds in two halves at once (`_graph_in_halves`); each fact keeps the
    best score of either half, so the ranking is the whole arm's, and the rule's."""
    retain(http, bank_id, [f"Acme shipped crate number {n} to the harbour." for n in range(HUB_FACTS)])
    retain(http, bank_id, [
        "Lena Brandt joined Acme as a chemist.",
        "Lena Brandt climbed a volcano in Chile.",
        "Lena Brandt sings in a choir.",
        "Lena Brandt adopted a grey parrot.",
        "Omar Haddad repaired the Acme boiler in winter.",
        "Omar Haddad teaches judo in Lisbon.",
        "Omar Haddad grows tomatoes on his balcony.",
        "Omar Haddad collects old maps.",
        "Lena Brandt and Omar Haddad hiked across Chile together.",
        "Omar Haddad and Lena Brandt opened a bakery in Lisbon.",
        "Tax records list Lena Brandt under code 7741.",
        "Omar Haddad paid a parking fine in Porto.",
    ])
    pool = await asyncpg.create_pool(pg_dsn, min_size=2, max_size=2)
    try:
        async with pool.acquire() as conn:
            texts = {row["id"]: row["text"] for row in await conn.fetch(
                "SELECT id, text FROM memory_units WHERE bank_id = $1", bank_id)}
            def fact(word: str) -> uuid.UUID:
                return next(unit for unit, text in texts.items() if word in text)

            seeds = [(fact("boiler"), 0.8), (fact("volcano"), 0.7), (fact("judo"), 0.6), (fact("chemist"), 0.5)]
            expected, _, _ = await expected_graph_scores(conn, bank_id, seeds)
            scope = UnitFilter(bank_id, ALL_TYPES)
            whole = await arms.graph(conn, scope, seeds, 300)
            parts = [dict(await arms.graph(conn, scope, seeds, 300, spread_from=seeds[first::2])) for first in (0, 1)]
            async with pool.acquire() as other:
                halves = await _graph_in_halves(conn, other, scope, seeds, 300)
            alone = await _graph_in_halves(conn, None, scope, seeds, 300)
        # With no connection to spare (this pool's two are both taken) a recall gets none, at once, and
        # runs the arm whole on the one it has: waiting for another while holding it, recalls could
        # wait on each other for ever.
        async with pool.acquire() as conn, pool.acquire() as taken:
            assert await asyncio.wait_for(spare_connection(pool), timeout=5) is None
            assert taken is not conn
    finally:
        await pool.close()

    both = parts[0].keys() & parts[1].keys()
    assert any(parts[0][u] > parts[1][u] for u in both) and any(parts[1][u] > parts[0][u] for u in both), \
        "the story has facts that each half reaches, some scored best by the first half and some by the second"
    assert parts[0].keys() - parts[1].keys() and parts[1].keys() - parts[0].keys(), "and facts only one half reaches"
    assert halves == whole
    assert alone == whole
    assert {unit for unit, _ in halves} == set(expected)
    for unit, score in halves:
        assert math.isclose(score, expected[unit], abs_tol=1e-6), (texts[unit], score, expected[unit])
    assert [score for _, score in halves] == sorted((score for _, score in halves), reverse=True)


async def test_the_graph_arm_reads_unit_entities_by_index_only_scans_and_the_reached_facts_at_once(
    http: httpx.Client, bank_id: str, pg_dsn: str
) -> None:
    """None of this shows in the ranking, all of it in the time:
    - the walk from a seed's entities to the facts naming them is an index-only scan (migration 026's
      index holds the fact, so a vacuumed table is never visited), and skips the seed's hub;
    - the reached facts' mentions of the seed's unwalked entities are read by one scan for all of
      them (a lookup per reached fact was ~10 % of the arm at 5,000 facts), and only those mentions
      (reading every mention of the reached facts was three times as many rows);
    - only the facts at the floor or above are rounded and sorted (a fifth of those reached at 5,000).
    Explained with sequential and bitmap scans off, so the plan shows what the indexes can serve
    rather than what is cheapest on a tiny table. From a seed of 0.4 the story has both an unwalked
    hub and reached facts under the floor (see the rule test above)."""
    retain_lena_story(http, bank_id)
    conn = await asyncpg.connect(pg_dsn)
    try:
        seed = await conn.fetchval(
            "SELECT id FROM memory_units WHERE bank_id = $1 AND text LIKE '%chemist%'", bank_id)
        seed_entities = await conn.fetchval("SELECT count(*) FROM unit_entities WHERE unit_id = $1", seed)
        _, light_used, below_floor = await expected_graph_scores(conn, bank_id, [(seed, 0.4)])
        assert light_used and below_floor, "the story reaches facts through an unwalked hub and under the floor"
        recording = Recording(conn)
        found = await arms.graph(recording, UnitFilter(bank_id, ALL_TYPES), [(seed, 0.4)], 300)  # type: ignore[arg-type]
        assert found, "the seed reaches other Lena Brandt facts"
        [(sql, args)] = recording.statements
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
            plan = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
    finally:
        await conn.close()

    nodes = plan_nodes(json.loads(plan))
    scans = [node for node in nodes if node.get("Relation Name") == "unit_entities"]
    walks = [node for node in scans if "unit_id" not in str(node.get("Index Cond"))]
    assert walks and all("entity_id =" in node["Index Cond"] for node in walks), "the walk looks entities' facts up"
    assert {(node["Node Type"], node["Index Name"]) for node in walks} == {
        ("Index Only Scan", "unit_entities_entity_unit")}
    assert sum(node["Actual Loops"] for node in walks) < seed_entities, "the seed's hub is not walked"
    by_fact = [node for node in scans if node not in walks]
    # One seed: its own entities are one scan, and so are the mentions of every fact it reached.
    assert [(node["Node Type"], node["Actual Loops"]) for node in by_fact] == [("Index Only Scan", 1)] * 2
    assert any("entity_id = ANY" in node["Index Cond"] for node in by_fact), \
        "the reached facts' mentions are read for the seed's unwalked entities only"
    [sort] = [node for node in nodes if node["Node Type"] == "Sort" and "round(" in str(node.get("Sort Key"))]
    assert sort["Actual Rows"] == len(found), "only the facts at the floor or above are rounded and sorted"
