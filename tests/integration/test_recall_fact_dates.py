"""A fact's date in its keyword index (migration 015): a turn whose words never say when it was said is
found by the date of its session ("in May 2023"), also for facts written before the migration."""

from __future__ import annotations

from importlib import resources

import httpx

from tests.conftest import _admin, start_server

MIGRATIONS = resources.files("engram.store.migrations")
SESSIONS = [  # the same words, said in two different months
    ("Maria: We spent the whole weekend helping out at the food bank.", "2023-05-14T10:00:00Z"),
    ("Maria: We spent the whole weekend helping out at the animal shelter.", "2023-08-20T10:00:00Z"),
    ("John: I finally fixed the leaking tap in the kitchen.", "2023-08-21T10:00:00Z"),
    ("John: The kids started their swimming lessons.", "2023-09-02T10:00:00Z"),
]
QUERY = "Where did Maria spend the weekend in May 2023?"
# What the keyword index was before migration 015: the fact and its lead-in, no date.
UNDATED_INDEX = """
DROP INDEX IF EXISTS memory_units_search;
ALTER TABLE memory_units DROP COLUMN search;
ALTER TABLE memory_units ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(lead_in, '')), 'B') || setweight(to_tsvector('english', text), 'A')
) STORED;
CREATE INDEX memory_units_search ON memory_units USING gin (search);
SELECT rebuild_keyword_frequencies();  -- and the word counts of migration 022 as they would be
"""


def retain_sessions(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": text, "timestamp": when, "document_id": f"session-{n}"}
             for n, (text, when) in enumerate(SESSIONS)]
    response = http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text


def keyword_ranking(http: httpx.Client, bank_id: str, query: str) -> list[str]:
    """The texts the keyword arm found, best first."""
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query, "trace": True})
    assert response.status_code == 200, response.text
    body = response.json()
    texts = {r["id"]: r["text"] for r in body["results"]}
    by_keyword = sorted((r for r in body["trace"]["results"] if "keyword" in r["ranks"]),
                        key=lambda r: r["ranks"]["keyword"])
    return [texts[r["id"]] for r in by_keyword]


def test_a_turn_is_found_by_its_sessions_date(http: httpx.Client, bank_id: str) -> None:
    """Both of Maria's turns share every word of the question but the date; only the session's date
    (in no fact's text) tells them apart in the keyword arm."""
    retain_sessions(http, bank_id)
    ranked = keyword_ranking(http, bank_id, QUERY)
    assert ranked[0].startswith("Maria: We spent the whole weekend helping out at the food bank"), ranked
    assert keyword_ranking(http, bank_id, "What did John do on 2 September 2023?")[0] == SESSIONS[3][0]


def keyword_scores(http: httpx.Client, bank_id: str, query: str) -> dict[str, float | None]:
    response = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": query})
    assert response.status_code == 200, response.text
    return {r["text"]: (r.get("scores") or {}).get("keyword") for r in response.json()["results"]}


def test_the_migration_dates_facts_written_before_it(isolated_dsn: str, bank_id: str) -> None:
    """Facts indexed without their dates (as before migration 015) tie on the question's words; the
    migration computes the index again for them, and the May turn scores higher."""
    may, august = SESSIONS[0][0], SESSIONS[1][0]
    server = start_server(isolated_dsn, name="dates-migration")
    try:
        with server.client() as http:
            retain_sessions(http, bank_id)
        server.stop()
        _admin(isolated_dsn, UNDATED_INDEX)  # the rows as an older version indexed them
        server = start_server(isolated_dsn, name="dates-migration")  # fresh connections, no cached plans
        with server.client() as http:
            undated = keyword_scores(http, bank_id, QUERY)
        server.stop()
        assert undated[may] == undated[august], undated
        # Then 015, and the word counts again as migration 022 (which follows it) makes them.
        _admin(isolated_dsn, MIGRATIONS.joinpath("015_dates_in_keyword_index.sql").read_text()
               + "\nSELECT rebuild_keyword_frequencies();")
        server = start_server(isolated_dsn, name="dates-migration")
        with server.client() as http:
            dated = keyword_scores(http, bank_id, QUERY)
        assert dated[may] > dated[august], dated
    finally:
        server.stop()
