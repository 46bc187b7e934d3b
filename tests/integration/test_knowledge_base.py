"""The knowledge base: folders and pages (a page is a mental model in the tree, its content generated
by the scripted LLM's reflect), the tree, a page as markdown with front matter, rename, move, delete of
a subtree with its pages' mental models, search (full text and meaning, fused) and the export."""

from __future__ import annotations

import httpx
import pytest

from engram.recall.scoring import RRF_K
from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import settle

KB = "/v1/default/banks/{}/knowledge-base"
ANSWERS = {"What does the team eat?": "The team orders ramen every Friday.",
           "How does the team deploy?": "Deploys go out on Tuesdays through the blue-green pipeline."}


def agent(request):
    for question, answer in ANSWERS.items():
        if question in request.user_text:
            return Reply.tool_calls([("done", {"answer": answer})])
    return Reply.error(400, "unexpected request")


@pytest.fixture
def http(llm_server: RunningServer, llm: ScriptedLLM) -> httpx.Client:
    llm.handler = agent
    with llm_server.client() as client:
        yield client


def test_folders_pages_tree_and_markdown(http: httpx.Client, bank_id: str) -> None:
    kb = KB.format(bank_id)
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    team = http.post(f"{kb}/folders", json={"name": "Team"})
    assert team.status_code == 201 and team.json()["kind"] == "folder"
    team = team.json()
    ops = http.post(f"{kb}/folders", json={"name": "Ops", "parent_id": team["id"]}).json()
    food = http.post(f"{kb}/pages", json={"name": "Food", "source_query": "What does the team eat?",
                                          "parent_id": team["id"], "tags": ["team"]})
    assert food.status_code == 201
    food = food.json()
    deploy = http.post(f"{kb}/pages", json={"name": "Deploys", "source_query": "How does the team deploy?",
                                            "parent_id": ops["id"]}).json()
    assert food["mental_model_id"] and food["operation_id"]
    settle(http, bank_id)

    (root,) = http.get(f"{kb}/tree").json()["roots"]
    assert (root["name"], [c["name"] for c in root["children"]]) == ("Team", ["Ops", "Food"])
    assert [c["name"] for c in root["children"][0]["children"]] == ["Deploys"]
    page = http.get(f"{kb}/pages/{food['page_id']}").json()
    assert page["body"] == "The team orders ramen every Friday." and page["tags"] == ["team"]
    front, _, body = page["markdown"].removeprefix("---\n").partition("\n---\n")
    assert 'name: "Food"' in front and 'source_query: "What does the team eat?"' in front
    assert body.strip() == "The team orders ramen every Friday."
    model = http.get(f"/v1/default/banks/{bank_id}/mental-models/{food['mental_model_id']}").json()
    assert model["content"] == page["body"], "a page is its mental model"

    files = {f["path"]: f["content"] for f in http.get(f"{kb}/export").json()["files"]}
    assert set(files) == {"team/food.md", "team/ops/deploys.md"}
    assert files["team/ops/deploys.md"].endswith("blue-green pipeline.\n")

    moved = http.patch(f"{kb}/nodes/{deploy['page_id']}", json={"parent_id": None, "name": "Releases"}).json()
    assert (moved["parent_id"], moved["name"]) == (None, "Releases")
    renamed = http.get(f"/v1/default/banks/{bank_id}/mental-models/{deploy['mental_model_id']}").json()
    assert renamed["name"] == "Releases"
    loop = http.patch(f"{kb}/nodes/{team['id']}", json={"parent_id": ops["id"]})
    assert loop.status_code == 400 and "parent_id" in loop.json()["detail"]
    folder_field = http.patch(f"{kb}/nodes/{team['id']}", json={"source_query": "x"})
    assert folder_field.status_code == 400 and "source_query" in folder_field.json()["detail"]
    assert http.post(f"{kb}/folders", json={"name": "  "}).status_code == 400
    under_a_page = http.post(f"{kb}/pages", json={"name": "x", "source_query": "q", "parent_id": food["page_id"]})
    assert under_a_page.status_code == 400 and "parent_id" in under_a_page.json()["detail"]

    deleted = http.delete(f"{kb}/nodes/{team['id']}").json()
    assert deleted["deleted_count"] == 3  # Team, Ops, Food
    assert [n["name"] for n in http.get(f"{kb}/tree").json()["roots"]] == ["Releases"]
    assert http.get(f"/v1/default/banks/{bank_id}/mental-models/{food['mental_model_id']}").status_code == 404
    assert http.get(f"{kb}/pages/{food['page_id']}").status_code == 404


def test_search_fuses_words_and_meaning(http: httpx.Client, bank_id: str) -> None:
    kb = KB.format(bank_id)
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    food = http.post(f"{kb}/pages", json={"name": "Food", "source_query": "What does the team eat?"}).json()
    deploy = http.post(f"{kb}/pages", json={"name": "Deploys", "source_query": "How does the team deploy?"}).json()
    settle(http, bank_id)
    words = http.get(f"{kb}/search", params={"q": "ramen"}).json()
    assert words["results"][0]["id"] == food["page_id"] and "ramen" in words["results"][0]["snippet"]
    assert words["results"][0]["score"] > 1 / (RRF_K + 1), "found by both arms: more than one arm can give"
    meaning = http.get(f"{kb}/search", params={"q": "shipping software releases to production"}).json()
    assert meaning["results"][0]["id"] == deploy["page_id"]
    assert http.get(f"{kb}/search", params={"q": ""}).status_code == 422


def test_pages_need_an_llm(server: RunningServer, bank_id: str) -> None:
    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
        refused = http.post(f"{KB.format(bank_id)}/pages", json={"name": "x", "source_query": "anything?"})
        assert refused.status_code == 400 and "LLM" in refused.json()["detail"]
        assert http.get(f"{KB.format(bank_id)}/tree").json()["roots"] == []


def test_tag_filters_work_as_in_recall(http: httpx.Client, bank_id: str) -> None:
    kb = KB.format(bank_id)
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    http.post(f"{kb}/pages", json={"name": "Food", "source_query": "What does the team eat?",
                                   "tags": ["team", "food"]}).raise_for_status()
    http.post(f"{kb}/pages", json={"name": "Deploys", "source_query": "How does the team deploy?"}).raise_for_status()
    settle(http, bank_id)

    def tree(**params: object) -> list[str]:
        return sorted(n["name"] for n in http.get(f"{kb}/tree", params=params).json()["roots"])

    assert tree(tags=["food"]) == ["Deploys", "Food"], "any lets untagged pages through, as recall does"
    assert tree(tags=["food"], tags_match="any_strict") == ["Food"]
    assert tree(tags=["food", "ops"], tags_match="all_strict") == []
    assert tree(tag_groups='[{"not": {"tags": ["food"]}}]') == ["Deploys"]
    found = http.get(f"{kb}/search", params={"q": "team", "tags": ["team"], "tags_match": "all_strict"}).json()
    assert [r["name"] for r in found["results"]] == ["Food"]
    bad = http.get(f"{kb}/tree", params={"tag_groups": "[{"})
    assert bad.status_code == 400 and bad.json()["field"] == "tag_groups"
    assert http.get(f"{kb}/tree", params={"tags_match": "most"}).json()["field"] == "tags_match"
