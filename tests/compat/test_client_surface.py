"""The official `hindsight-client==1.1.0` on the operations of issue 16: editing documents and
memories, dry-run extraction, and moving banks (export, import, clone). Same calls a Hindsight
user makes; each test checks what came back against what was stored."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hindsight_client_api.models.content import Content
from hindsight_client_api.models.dry_run_extract_request import DryRunExtractRequest
from hindsight_client_api.models.update_document_request import UpdateDocumentRequest
from hindsight_client_api.models.update_memory_request import UpdateMemoryRequest

from tests.compat.test_hindsight_client import ThreadedClient, all_memories, wait_for_operation
from tests.conftest import RunningServer


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[ThreadedClient]:
    hindsight = ThreadedClient(server.url)
    yield hindsight
    hindsight.close()


def test_update_document_history_and_reprocess(client: ThreadedClient, bank_id: str) -> None:
    client.retain(bank_id, "Eve runs the Oslo warehouse.", document_id="w-1", tags=["ops"])
    answer = client.run(client.documents.update_document(bank_id, "w-1", UpdateDocumentRequest(tags=["ops", "north"])))
    assert answer.success is True
    assert client.run(client.documents.get_document(bank_id, "w-1")).tags == ["ops", "north"]
    assert all(m.tags == ["ops", "north"] for m in all_memories(client, bank_id))

    reprocess = client.run(client.documents.reprocess_document(bank_id, "w-1"))
    assert reprocess.success and reprocess.items_count == 1
    assert wait_for_operation(client, bank_id, reprocess.operation_id).status == "completed"

    history = client.run(client.documents.get_document_history(bank_id, "w-1"))
    assert [event.kind.value for event in history.items] == ["reprocess", "retag", "retain"]
    assert history.items[0].operation_id == reprocess.operation_id


def test_update_memory_and_dry_run(client: ThreadedClient, bank_id: str) -> None:
    client.retain(bank_id, "Frank owns a grey cat.")
    (memory,) = all_memories(client, bank_id)
    client.run(client.memory.update_memory(bank_id, memory.id, UpdateMemoryRequest(
        text="Frank owns a black cat.", mentioned_at="2025-01-02T03:04:05Z")))
    (edited,) = all_memories(client, bank_id)
    assert edited.text == "Frank owns a black cat." and edited.mentioned_at.startswith("2025-01-02T03:04:05")

    preview = client.run(client.memory.dry_run_extract_memories(bank_id, DryRunExtractRequest(
        content=Content("Gina learns Rust. Gina plays chess."))))
    assert [fact.text for fact in preview.facts] and preview.chunks[0].fact_count == len(preview.facts)
    assert any("Rust" in fact.text for fact in preview.facts)
    time.sleep(0)  # nothing is stored by a dry run:
    assert [m.id for m in all_memories(client, bank_id)] == [memory.id]


def test_export_import_and_clone_bank(client: ThreadedClient, bank_id: str) -> None:
    client.create_bank(bank_id, name="Source bank")
    client.retain(bank_id, "Hugo repairs bicycles in Ghent.", document_id="h-1", tags=["shop"])
    client.create_directive(bank_id, name="polite", content="Always be polite.", priority=3)
    archive = client.export_bank(bank_id, poll_interval=0.2)
    assert archive[:2] == b"PK", "a ZIP archive"

    restored = bank_id + "-restored"
    operation_id = client.import_bank(bank_id, archive, target_bank_id=restored)
    assert wait_for_operation(client, bank_id, operation_id).status == "completed"
    (memory,) = all_memories(client, restored)
    assert memory.text == "Hugo repairs bicycles in Ghent." and memory.tags == ["shop"]
    assert [d.name for d in client.list_directives(restored).items] == ["polite"]

    cloned = bank_id + "-cloned"
    operation_id = client.clone_bank(bank_id, cloned)
    assert wait_for_operation(client, bank_id, operation_id).status == "completed"
    assert [m.text for m in all_memories(client, cloned)] == [memory.text]
    assert client.run(client.documents.get_document(cloned, "h-1")).tags == ["shop"]


def test_export_and_import_documents(client: ThreadedClient, bank_id: str) -> None:
    client.retain(bank_id, "Ines speaks Portuguese.", document_id="i-1")
    client.retain(bank_id, "Jon speaks Danish.", document_id="j-1")
    archive = client.export_documents(bank_id, document_ids=["i-1"], poll_interval=0.2)
    target = bank_id + "-docs"
    client.create_bank(target)
    submission = client.run(client.document_transfer.import_documents(target, archive))
    assert wait_for_operation(client, target, submission.operation_id).status == "completed"
    assert [m.text for m in all_memories(client, target)] == ["Ines speaks Portuguese."]


def test_content_blocks_and_attachment_bytes(client: ThreadedClient, bank_id: str) -> None:
    from tests.integration.test_attachments import PDF, block, png

    image = png(4, 4)
    client.retain(bank_id, [{"type": "text", "text": "The router's status light is shown here:"},
                            block("image", "image/png", image),
                            block("file", "application/pdf", PDF, filename="router.pdf")], document_id="r-1")
    document = client.run(client.documents.get_document(bank_id, "r-1"))
    assert [(a.kind, a.media_type, a.filename) for a in document.attachments] == [
        ("image", "image/png", None), ("file", "application/pdf", "router.pdf")]
    for attachment, original in zip(document.attachments, (image, PDF)):
        assert bytes(client.run(client.memory.get_bank_attachment(bank_id, attachment.id))) == original
    assert any("status light" in m.text for m in all_memories(client, bank_id)), "the text around them is retained"


def test_retain_files(client: ThreadedClient, bank_id: str, tmp_path) -> None:
    from tests.integration.test_files_retain import make_docx, make_pdf

    (tmp_path / "log.pdf").write_bytes(make_pdf())
    (tmp_path / "onboarding.docx").write_bytes(make_docx())
    answer = client.retain_files(bank_id, [tmp_path / "log.pdf", tmp_path / "onboarding.docx"],
                                 files_metadata=[{"document_id": "log", "tags": ["ops"]}, {"document_id": "onb"}])
    assert len(answer.operation_ids) == 2
    assert [wait_for_operation(client, bank_id, op, timeout=90).status for op in answer.operation_ids] == [
        "completed", "completed"]
    log = client.run(client.documents.get_document(bank_id, "log"))
    assert "Nadia Petrova" in log.original_text and log.tags == ["ops"]
    assert [a.filename for a in log.attachments] == ["log.pdf"]
    assert "Omar Haddad" in client.run(client.documents.get_document(bank_id, "onb")).original_text


def test_download_file_and_the_removed_sync_export(client: ThreadedClient, bank_id: str) -> None:
    from hindsight_client_api.exceptions import ApiException

    client.retain(bank_id, "Kai repairs the elevators.", document_id="k-1")
    submission = client.run(client.bank_transfer.export_bank_transfer(bank_id))
    status = wait_for_operation(client, bank_id, submission.operation_id)
    key = status.result_metadata["storage_key"]
    archive = bytes(client.run(client.document_transfer.download_file(key)))  # slashes sent as %2F
    assert archive[:2] == b"PK" and len(archive) == status.result_metadata["byte_size"]
    with pytest.raises(ApiException) as gone:
        client.run(client.document_transfer.export_documents_sync_removed(bank_id))
    assert gone.value.status == 410
