"""The official `hindsight-client==1.1.0` on the knowledge base: a folder, a page whose content the
scripted LLM's reflect writes, the tree, the page, search, rename and move, export and delete."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat.test_hindsight_client import ThreadedClient
from tests.conftest import RunningServer
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.waiting import wait_for


@pytest.fixture
def client(llm_server: RunningServer, llm: ScriptedLLM) -> Iterator[ThreadedClient]:
    llm.handler = lambda request: Reply.tool_calls([("done", {"answer": "Standups are at 9:30 in room Kepler."})])
    hindsight = ThreadedClient(llm_server.url)
    yield hindsight
    hindsight.close()


def test_knowledge_base_through_the_client(client: ThreadedClient, bank_id: str) -> None:
    client.create_bank(bank_id)
    folder = client.create_knowledge_folder(bank_id, "Rituals")
    assert folder.kind == "folder" and folder.name == "Rituals"
    created = client.create_knowledge_page(bank_id, "Standups", "When are standups?", parent_id=folder.id)
    assert created.page_id and created.mental_model_id
    page = wait_for(lambda: (p := client.get_knowledge_page(bank_id, created.page_id)).body and p,
                    "the page's content")
    assert page.body == "Standups are at 9:30 in room Kepler." and page.markdown.startswith("---\n")

    tree = client.get_knowledge_base_tree(bank_id)
    assert [(n.name, [c.name for c in n.children]) for n in tree.roots] == [("Rituals", ["Standups"])]
    found = client.search_knowledge_base(bank_id, "Kepler")
    assert [r.id for r in found.results][:1] == [created.page_id]

    moved = client.update_knowledge_node(bank_id, created.page_id, name="Daily standups", parent_id=None)
    assert (moved.name, moved.parent_id) == ("Daily standups", None)
    exported = client.export_knowledge_base(bank_id)
    assert [f.path for f in exported.files] == ["daily-standups.md"]
    client.delete_knowledge_node(bank_id, folder.id)
    assert [n.name for n in client.get_knowledge_base_tree(bank_id).roots] == ["Daily standups"]
