"""POST …/files/retain through the real server: a PDF and a DOCX made here (reportlab, python-docx)
and text formats become documents whose facts come from their text, each file one operation; the
original is kept byte for byte; an unreadable file fails its operation with the reason; an unknown
type and a bad request are refused at once, naming the file or field."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx

from tests.support.waiting import finish_operation

DOCX_MEDIA = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def make_pdf() -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    page = canvas.Canvas(buffer, pagesize=A4)
    page.drawString(72, 760, "Maintenance log. The boiler in building C was serviced by Nadia Petrova.")
    page.showPage()
    page.drawString(72, 760, "The next inspection of the boiler is due in October.")
    page.save()
    return buffer.getvalue()


def make_docx() -> bytes:
    from docx import Document

    document = Document()
    document.add_heading("Onboarding", 1)
    document.add_paragraph("Omar Haddad joins the data team on Monday.")
    table = document.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Tool", (0, 1): "Owner", (1, 0): "Airflow", (1, 1): "Omar"}.items():
        table.cell(r, c).text = text
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def upload(http: httpx.Client, bank_id: str, files: list[tuple[str, bytes, str]], request: Any = None,
           field: str = "files") -> httpx.Response:
    body = {"request": json.dumps(request if request is not None else {})}
    return http.post(f"/v1/default/banks/{bank_id}/files/retain", data=body,
                     files=[(field, (name, data, media)) for name, data, media in files])


def test_pdf_docx_and_text_files_become_documents(http: httpx.Client, bank_id: str) -> None:
    pdf, docx = make_pdf(), make_docx()
    files = [("log.pdf", pdf, "application/pdf"), ("onboarding.docx", docx, DOCX_MEDIA),
             ("hours.csv", b"day,opens\nMonday,9:00\n", "text/csv"), ("notes.md", b"# Notes\nKeys are at desk 4.", "")]
    meta = [{"document_id": "log", "tags": ["ops"], "context": "facilities", "metadata": {"site": "C"}},
            {"document_id": "onboarding"}, {"document_id": "hours"}, {"document_id": "notes"}]
    answer = upload(http, bank_id, files, {"files_metadata": meta})
    assert answer.status_code == 200, answer.text
    operation_ids = answer.json()["operation_ids"]
    assert len(operation_ids) == 4 and len(set(operation_ids)) == 4, "one operation per file"
    results = [finish_operation(http, bank_id, op) for op in operation_ids]
    assert [r["status"] for r in results] == ["completed"] * 4, results

    log = http.get(f"/v1/default/banks/{bank_id}/documents/log").json()
    assert "Nadia Petrova" in log["original_text"] and "October" in log["original_text"], "both pages"
    assert log["tags"] == ["ops"] and log["document_metadata"] == {"site": "C"}
    (original,) = log["attachments"]
    assert original["role"] == "original" and original["filename"] == "log.pdf"
    assert http.get(original["url"]).content == pdf, "the original is kept byte for byte"
    facts = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"document_id": "log"}).json()["items"]
    assert any("Nadia Petrova" in f["text"] for f in facts) and all(f["context"] == "facilities" for f in facts)

    onboarding = http.get(f"/v1/default/banks/{bank_id}/documents/onboarding").json()["original_text"]
    assert onboarding.startswith("# Onboarding") and "| Airflow | Omar |" in onboarding, "headings and tables kept"
    assert "| Monday | 9:00 |" in http.get(f"/v1/default/banks/{bank_id}/documents/hours").json()["original_text"]
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "Who serviced the boiler?"})
    assert "Nadia" in recalled.json()["results"][0]["text"]


def test_unreadable_file_fails_its_operation_with_the_reason(http: httpx.Client, bank_id: str) -> None:
    answer = upload(http, bank_id, [("broken.pdf", b"%PDF-1.4 this is not really a pdf", "application/pdf"),
                                    ("fine.txt", b"The parking lot closes at 22:00.", "text/plain")])
    assert answer.status_code == 200, answer.text
    broken, fine = (finish_operation(http, bank_id, op) for op in answer.json()["operation_ids"])
    assert broken["status"] == "failed" and "broken.pdf" in broken["error_message"]
    assert "PDF" in broken["error_message"]
    assert fine["status"] == "completed", "one bad file does not stop the others"


def test_unknown_types_and_bad_requests_are_refused(http: httpx.Client, bank_id: str) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
    answer = upload(http, bank_id, [("a.txt", b"fine", "text/plain"), ("song.mp3", b"ID3...", "audio/mpeg")])
    assert answer.status_code == 415 and "song.mp3" in answer.json()["detail"]
    assert http.get(f"/v1/default/banks/{bank_id}/operations").json()["total"] == 0, "nothing was queued"
    many = [(f"f{i}.txt", b"x", "text/plain") for i in range(11)]
    assert upload(http, bank_id, many).json()["field"] == "files"
    bad = http.post(f"/v1/default/banks/{bank_id}/files/retain", data={"request": "{not json"},
                    files=[("files", ("a.txt", b"x", "text/plain"))])
    assert bad.status_code == 400 and bad.json()["field"] == "request"
    mismatch = upload(http, bank_id, [("a.txt", b"x", "text/plain")], {"files_metadata": [{}, {}]})
    assert mismatch.status_code == 400 and mismatch.json()["field"] == "request.files_metadata"
    misplaced = upload(http, bank_id, [("a.txt", b"x", "text/plain")], {"tags": ["t"]})
    assert misplaced.status_code == 400 and "files_metadata" in misplaced.json()["detail"]
    empty = upload(http, bank_id, [("a.txt", b"", "text/plain")])
    assert empty.status_code == 400 and empty.json()["field"] == "files[0]"
    brackets = upload(http, bank_id, [("b.txt", b"Ravi waters the plants.", "text/plain")], field="files[]")
    assert brackets.status_code == 200 and len(brackets.json()["operation_ids"]) == 1
