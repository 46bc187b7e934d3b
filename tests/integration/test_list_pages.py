"""Pages of the memory graph and of the document list: each page is cut on narrow rows first and only
its own rows are read whole, so these check what a page holds, in what order, and the totals beside it."""

from __future__ import annotations

import httpx

VOYAGES = 5


def retain_voyages(http: httpx.Client, bank_id: str) -> None:
    """One document a retain, oldest first, each fact naming its own captain."""
    for n in range(VOYAGES):
        item = {"content": f"Voyage {n} set sail.", "document_id": f"voyage-{n}",
                "entities": [{"text": f"Captain {n}"}]}
        assert http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [item]}).status_code == 200


def test_a_memory_graph_page_holds_the_newest_facts_with_their_entities(http: httpx.Client, bank_id: str) -> None:
    retain_voyages(http, bank_id)
    graph = http.get(f"/v1/default/banks/{bank_id}/graph", params={"limit": 3}).json()
    assert graph["total_units"] == VOYAGES  # every match, not the page
    assert [node["data"]["text"] for node in graph["nodes"]] == ["Voyage 4 set sail.", "Voyage 3 set sail.",
                                                                 "Voyage 2 set sail."]
    assert [row["text"] for row in graph["table_rows"]] == [node["data"]["text"] for node in graph["nodes"]]
    for node in graph["nodes"]:
        voyage = node["data"]["text"].split()[1]
        assert f"Captain {voyage}" in node["data"]["entities"]


def test_a_document_page_counts_its_own_facts_and_every_page_reports_the_total(
    http: httpx.Client, bank_id: str
) -> None:
    retain_voyages(http, bank_id)
    url = f"/v1/default/banks/{bank_id}/documents"
    first = http.get(url, params={"limit": 2}).json()
    assert [d["id"] for d in first["items"]] == ["voyage-4", "voyage-3"]  # the last updated first
    assert [d["memory_unit_count"] for d in first["items"]] == [1, 1]
    assert first["total"] == VOYAGES
    last = http.get(url, params={"limit": 2, "offset": 4}).json()
    assert [d["id"] for d in last["items"]] == ["voyage-0"] and last["total"] == VOYAGES
    past_the_end = http.get(url, params={"limit": 2, "offset": 10}).json()
    assert past_the_end["items"] == [] and past_the_end["total"] == VOYAGES
