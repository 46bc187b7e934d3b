"""The control plane's documents and transfer pages in headless Chromium: uploading files with
progress per file, a document's attachments (images inline), tag editing and history, editing a
memory, and cloning a bank — each checked against what the API then holds."""

from __future__ import annotations

import base64
import uuid

from tests.conftest import RunningServer
from tests.integration.test_attachments import png
from tests.support.waiting import settle, wait_for


def test_upload_files_and_edit_a_document(ui, server: RunningServer, tmp_path) -> None:
    bank_id = f"ui-docs-{uuid.uuid4().hex[:8]}"
    with server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    (tmp_path / "notes.md").write_text("# Notes\nThe printer on floor 2 needs toner.")
    (tmp_path / "hours.csv").write_text("day,opens\nMonday,9:00\n")
    view = ui(server)
    page = view.open(f"#/b/{bank_id}/documents")
    page.locator("#upload-files").set_input_files([str(tmp_path / "notes.md"), str(tmp_path / "hours.csv")])
    page.locator("#upload-tags").fill("office")
    page.locator("#upload-form button").click()
    page.locator(".upload-row[data-status=completed]").nth(1).wait_for()
    page.locator("#document-list tbody tr").nth(1).wait_for()
    assert page.locator("#document-list tbody tr").count() == 2
    view.screenshot("20-documents")

    page.locator("#document-list a").first.click()
    page.locator("#tag-form").wait_for()
    assert page.locator(".attachment").count() == 1, "the uploaded original is the document's file"
    page.locator("#document-tags").fill("office, floor-2")
    page.locator("#tag-form button").click()
    page.locator("#document-history li", has_text="retag").wait_for()
    document_id = page.url.rsplit("/", 1)[1]
    with server.client() as http:
        stored = http.get(f"/v1/default/banks/{bank_id}/documents/{document_id}").json()
    assert stored["tags"] == ["office", "floor-2"]


def test_image_attachments_show_inline_and_a_memory_can_be_edited(ui, server: RunningServer) -> None:
    bank_id = f"ui-img-{uuid.uuid4().hex[:8]}"
    image = base64.b64encode(png(6, 4)).decode()
    with server.client() as http:
        http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"document_id": "photo", "content": [
            {"type": "text", "text": "Quinn painted the lobby wall green."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}}]}]}
        ).raise_for_status()
        (fact,) = http.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]
    view = ui(server)
    page = view.open(f"#/b/{bank_id}/documents/photo")
    page.locator("img.attachment-image").wait_for()
    assert page.locator("img.attachment-image").evaluate("img => img.complete && img.naturalWidth") == 6
    view.screenshot("21-document-attachments")

    page = view.open(f"#/b/{bank_id}/memories/{fact['id']}")
    page.locator("#edit-text").fill("Quinn painted the lobby wall blue.")
    page.locator("#edit-form button[type=submit]").click()
    page.locator("p.memory-text", has_text="blue").wait_for()
    with server.client() as http:
        assert http.get(f"/v1/default/banks/{bank_id}/memories/{fact['id']}").json()["text"].endswith("blue.")


def test_clone_a_bank_from_the_documents_page(ui, server: RunningServer) -> None:
    bank_id = f"ui-clone-{uuid.uuid4().hex[:8]}"
    with server.client() as http:
        http.post(f"/v1/default/banks/{bank_id}/memories",
                  json={"items": [{"content": "Rosa runs the night shift.", "document_id": "r"}]}).raise_for_status()
    view = ui(server)
    page = view.open(f"#/b/{bank_id}/documents")
    page.locator("#clone-target").fill(bank_id + "-copy")
    page.locator("#clone-bank").click()
    page.locator("#cloned-bank").wait_for(timeout=60_000)
    with server.client() as http:
        settle(http, bank_id + "-copy")
        copied = wait_for(lambda: http.get(f"/v1/default/banks/{bank_id}-copy/memories/list").json()["items"],
                          "the clone's memories")
    assert [m["text"] for m in copied] == ["Rosa runs the night shift."]
