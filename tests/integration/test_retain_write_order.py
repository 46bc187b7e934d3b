"""A retain resolves and counts its facts' entities while the embedder works, before it stores the
facts (its connection would otherwise sit idle until the vectors come in), and links the facts to
them once they are stored. Read from PostgreSQL's command ids: each row keeps the number (`cmin`) of
the statement of its transaction that wrote it, so they give the order of the retain's statements
without any instrumentation of the server."""

from __future__ import annotations

import re
from collections.abc import Iterator

import asyncpg
import pytest

from tests.conftest import RunningServer, scripted_server
from tests.support.scripted_llm import ChatRequest, ScriptedLLM

NAMES = ["Ada Lovelace", "Charles Babbage"]


@pytest.fixture(scope="module")
def order_server(pg_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[tuple[RunningServer, str]]:
    """The scripted LLM's server on a database of its own, with nothing after a retain that would
    rewrite its entities (observations, consolidation)."""
    with scripted_server(pg_dsn, scripted_llm, "retain-write-order",
                         HINDSIGHT_API_ENABLE_AUTO_CONSOLIDATION="false",
                         HINDSIGHT_API_ENABLE_OBSERVATIONS="false") as running:
        yield running


def one_fact_naming_both(request: ChatRequest) -> dict:
    """Each item "Ada Lovelace met Charles Babbage on day N." is one fact naming both."""
    day = re.search(r"on day (\d+)", request.user_text).group(1)
    return {"facts": [{"what": f"{NAMES[0]} met {NAMES[1]} on day {day}", "fact_type": "world", "entities": NAMES}]}


# 1 item: a sync retain's path; 60: a bulk retain's (50 facts or more), whose semantic links are
# searched beside the transaction.
@pytest.mark.parametrize("items", [1, 60])
async def test_entities_are_resolved_and_counted_before_the_facts_are_stored_and_linked_after(
    order_server: tuple[RunningServer, str], llm: ScriptedLLM, bank_id: str, items: int
) -> None:
    server, dsn = order_server
    llm.handler = one_fact_naming_both
    with server.client() as http:
        response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
            {"content": f"{NAMES[0]} met {NAMES[1]} on day {day}."} for day in range(items)]})
        assert response.status_code == 200, response.text
    conn = await asyncpg.connect(dsn)
    try:
        facts = await conn.fetch(
            "SELECT m.id, m.cmin::text::int AS written, m.xmin::text AS tx FROM memory_units m WHERE m.bank_id = $1",
            bank_id)
        entities = await conn.fetch(
            "SELECT canonical_name, mention_count, cmin::text::int AS written, xmin::text AS tx"
            " FROM entities WHERE bank_id = $1", bank_id)
        mentions = await conn.fetch(
            "SELECT unit_id, cmin::text::int AS written, xmin::text AS tx FROM unit_entities WHERE bank_id = $1",
            bank_id)
        pairs = await conn.fetch(
            "SELECT c.count, c.cmin::text::int AS written FROM entity_cooccurrences c"
            " JOIN entities e ON e.id = c.entity_a WHERE e.bank_id = $1", bank_id)
    finally:
        await conn.close()
    assert len(facts) == items
    assert {e["canonical_name"]: e["mention_count"] for e in entities} == dict.fromkeys(NAMES, items)
    assert len(mentions) == 2 * items and [p["count"] for p in pairs] == [items]
    assert len({row["tx"] for row in [*facts, *entities, *mentions]}) == 1, "one transaction wrote them all"
    first_fact = min(f["written"] for f in facts)
    # Every entity's row as the retain left it (created or counted) and every co-occurrence pair were
    # written before the first fact; the mentions, which reference the facts, after the last one.
    assert max(e["written"] for e in entities) < first_fact, (entities, first_fact)
    assert max(p["written"] for p in pairs) < first_fact
    assert min(m["written"] for m in mentions) > max(f["written"] for f in facts)
