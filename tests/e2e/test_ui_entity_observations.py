"""The control plane's entity pages, in headless Chromium: each entity's kind in the list (and the
kind filter), and on an entity's page its own observation, marked stale once new facts arrived."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.conftest import RunningServer
from tests.support.scripted_llm import ScriptedLLM
from tests.support.waiting import settle


def orchard_llm(request: Any) -> Any:
    if request.schema_name == "EntitySummary":
        return {"text": "Kofi tends an orchard of mango trees."}
    if request.schema_name == "ConsolidationActions":
        return {"creates": [], "updates": [], "deletes": []}
    text = request.user_text.split("Text:\n", 1)[1].strip()
    return {"facts": [{"what": text, "entities": [{"name": "Kofi", "type": "person"},
                                                  {"name": "Accra", "type": "place"}]}]}


def retain(http: httpx.Client, bank_id: str, contents: list[str]) -> None:
    items = [{"content": content} for content in contents]
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": items}).raise_for_status()
    settle(http, bank_id)


def test_an_entity_page_shows_its_kind_and_its_observation_going_stale(
    ui, llm_server: RunningServer, llm: ScriptedLLM
) -> None:
    bank_id = f"ui-ent-{uuid.uuid4().hex[:8]}"
    llm.handler = orchard_llm
    with llm_server.client() as http:
        retain(http, bank_id, [f"Kofi planted mango tree {n} near Accra." for n in range(5)])
        kofi = next(e for e in http.get(f"/v1/default/banks/{bank_id}/entities").json()["items"]
                    if e["canonical_name"] == "Kofi")
        view = ui(llm_server)
        page = view.open(f"#/b/{bank_id}/entities/{kofi['id']}")
        observation = page.locator("li.entity-observation")
        observation.wait_for()
        assert "Kofi tends an orchard of mango trees." in observation.inner_text()
        assert observation.locator(".badge").inner_text() == "up to date"
        assert page.locator("table.kv tr", has_text="Type").locator("td").inner_text() == "person"

        http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"enable_observations": False}}
                   ).raise_for_status()
        retain(http, bank_id, ["Kofi sold his first mangoes in Accra."])
        page.reload()
        page.locator("li.entity-observation .badge-stale").wait_for()
        view.screenshot("entity-observation-stale")

        page = view.open(f"#/b/{bank_id}/entities?entity_type=place")
        page.locator("table.entities tbody tr").first.wait_for()
        assert page.locator("table.entities tbody tr td:first-child").all_inner_texts() == ["Accra"]
        assert page.locator("select[name=entity_type]").input_value() == "place"
