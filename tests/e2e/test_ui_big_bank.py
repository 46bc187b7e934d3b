"""The control plane with a bank of 12,000 memories (seeded straight into PostgreSQL: building it
through retain would take minutes): every page pages its lists, counts carry thousands separators,
and the API routes the pages call answer pages, not whole tables. An unknown bank is a 404 page
without the bank's navigation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, _admin, separate_database, start_server

BANK = "big-bank"
MEMORIES = 12_000  # a tenth of them observations
ENTITIES = 600

SEED = f"""
INSERT INTO banks (bank_id) VALUES ('{BANK}');
INSERT INTO documents (id, bank_id, original_text, content_hash)
  SELECT 'doc-' || g, '{BANK}', 'document ' || g, md5(g::text) FROM generate_series(1, 120) g;
INSERT INTO memory_units (id, bank_id, document_id, text, fact_type, embedding, mentioned_at, tags, proof_count)
  SELECT gen_random_uuid(), '{BANK}', CASE WHEN g % 10 = 0 THEN NULL ELSE 'doc-' || (g % 120 + 1) END,
         'Harbour log entry ' || g || ': the ferry ' || (g % 37) || ' left on time.',
         CASE WHEN g % 10 = 0 THEN 'observation' ELSE 'world' END,
         (SELECT array_agg(sin(g * 0.37 + i))::vector FROM generate_series(1, 384) i),
         now() - g * interval '1 minute',
         CASE WHEN g % 3 = 0 THEN ARRAY['harbour'] WHEN g % 3 = 1 THEN ARRAY['harbour', 'log'] ELSE '{{}}' END,
         CASE WHEN g % 10 = 0 THEN 1 + g % 5 ELSE 1 END
  FROM generate_series(1, {MEMORIES}) g;
INSERT INTO entities (id, bank_id, canonical_name, mention_count)
  SELECT gen_random_uuid(), '{BANK}', 'Skipper ' || g, 20 FROM generate_series(1, {ENTITIES}) g;
INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
  SELECT m.id, e.id, '{BANK}', e.canonical_name
  FROM (SELECT id, row_number() OVER (ORDER BY id) n FROM memory_units WHERE bank_id = '{BANK}') m
  JOIN (SELECT id, canonical_name, row_number() OVER (ORDER BY canonical_name) n FROM entities
        WHERE bank_id = '{BANK}') e ON e.n = m.n % {ENTITIES} + 1;
INSERT INTO entity_cooccurrences (bank_id, entity_a, entity_b, count)
  SELECT '{BANK}', least(a.id, b.id), greatest(a.id, b.id), 3
  FROM entities a JOIN entities b ON b.bank_id = a.bank_id AND b.canonical_name = 'Skipper ' || (
    split_part(a.canonical_name, ' ', 2)::int % {ENTITIES} + 1)
  WHERE a.bank_id = '{BANK}' ON CONFLICT DO NOTHING;
ANALYZE;
"""


@pytest.fixture(scope="module")
def big_server(pg_dsn: str) -> Iterator[RunningServer]:
    with separate_database(pg_dsn) as dsn:
        running = start_server(dsn, name="big-bank")  # runs the migrations
        try:
            started = time.monotonic()
            _admin(dsn, SEED)
            print(f"\nseeded {MEMORIES:,} memories in {time.monotonic() - started:.1f} s")
            yield running
        finally:
            running.stop()


def _timed(http: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    started = time.monotonic()
    response = http.get(path, params=params)
    assert response.status_code == 200, response.text
    print(f"GET {path} {params}: {1000 * (time.monotonic() - started):.0f} ms")
    return response.json()


def test_the_routes_the_pages_call_answer_pages(big_server: RunningServer) -> None:
    base = f"/v1/default/banks/{BANK}"
    with httpx.Client(base_url=big_server.url, timeout=60) as http:
        stats = _timed(http, f"{base}/stats")
        assert stats["total_nodes"] == MEMORIES
        _timed(http, f"{base}/memories/list", limit=50)  # the first read of a freshly seeded table
        page = _timed(http, f"{base}/memories/list", limit=50, offset=MEMORIES - 50)
        assert page["total"] == MEMORIES and len(page["items"]) == 50
        assert len(_timed(http, f"{base}/memories/list", limit=50, q="ferry 3")["items"]) == 50
        untagged = _timed(http, f"{base}/memories/list", type="observation", untagged="true", limit=25)
        assert untagged["total"] == MEMORIES // 10 // 3 and len(untagged["items"]) == 25
        assert all(item["tags"] == [] for item in untagged["items"])
        entities = _timed(http, f"{base}/entities", limit=50)
        assert entities["total"] == ENTITIES and len(entities["items"]) == 50
        graph = _timed(http, f"{base}/entities/graph", limit=150)
        assert len(graph["nodes"]) <= 150
        assert len(_timed(http, f"{base}/tags", limit=100)["items"]) == 2
        assert _timed(http, f"{base}/observations/scopes", limit=50)["total"] == 3
        assert _timed(http, f"{base}/documents", limit=50)["total"] == 120


def test_pages_keep_working_with_thousands_separators(ui: Any, big_server: RunningServer) -> None:
    view = ui(big_server)
    page = view.open()
    row = page.locator(f"tr[data-bank='{BANK}']")
    row.wait_for()
    page.wait_for_function("b => !document.querySelector(`tr[data-bank='${b}']`).textContent.includes('…')", arg=BANK)
    assert row.locator("td").nth(1).inner_text() == "10,800", "facts: 12,000 memories less 1,200 observations"
    assert row.locator("td").nth(2).inner_text() == "1,200"

    page = view.open(f"#/b/{BANK}")
    page.locator(".stats").wait_for()
    assert page.locator(".stat", has_text="world facts").locator(".stat-value").inner_text() == "10,800"
    view.screenshot("big-bank-overview")

    page = view.open(f"#/b/{BANK}/memories")
    page.locator("table.memories tbody tr").first.wait_for()
    assert page.locator("#memory-count").inner_text() == "1–50 of 12,000"
    page.locator(".pager a", has_text="Next").click()
    page.wait_for_function("() => document.querySelector('#memory-count')?.textContent === '51–100 of 12,000'")
    page = view.open(f"#/b/{BANK}/memories?offset={MEMORIES - 50}")
    page.wait_for_function("() => document.querySelector('#memory-count')?.textContent === '11,951–12,000 of 12,000'")
    assert page.locator("table.memories tbody tr").count() == 50
    view.screenshot("big-bank-memories")

    page = view.open(f"#/b/{BANK}/observations")
    page.locator("section.card").first.wait_for()
    untagged = page.locator("section.scope[data-scope='']")
    assert "400 observations" in untagged.locator("h2").inner_text()
    assert untagged.locator("tbody tr").count() == 25, "a page of the untagged scope, found among 1,200"

    page = view.open(f"#/b/{BANK}/entities")
    page.locator("svg").first.wait_for()
    assert "of 600 entities" in page.locator("#main").inner_text()


def test_an_unknown_bank_is_a_404_page_without_the_bank_navigation(ui: Any, big_server: RunningServer) -> None:
    view = ui(big_server, expected_http_errors=True)
    for route in ("#/b/no-such-bank", "#/b/no-such-bank/memories", "#/b/no-such-bank/recall"):
        page = view.open(route)
        page.locator("#not-found").wait_for()
        assert page.locator("#not-found").inner_text() == "404 · Bank not found"
        assert "no-such-bank" in page.locator("#main").inner_text()
        assert page.locator("#sidenav").is_hidden(), "no bank navigation for a bank that does not exist"
    view.screenshot("unknown-bank")
    page = view.open(f"#/b/{BANK}/memories")
    page.locator("table.memories tbody tr").first.wait_for()
    assert page.locator("#sidenav").is_visible()
