"""POST …/files/retain through the real server: a PDF, a DOCX and a PPTX made here (reportlab,
python-docx, python-pptx) and text formats become documents whose facts come from their text, each
file one operation; the original is kept byte for byte; an unreadable file fails its operation with
the reason; an unknown type and a bad request are refused at once, naming the file or field."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx

from tests.support.waiting import finish_operation

DOCX_MEDIA = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX_MEDIA = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


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


def make_pptx() -> bytes:
    """Four slides: a title slide, bullets two levels deep with speaker notes, a table placed above a
    text box (the table is added last, so reading order must come from the positions), and a chart."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Relocation plan"
    first.placeholders[1].text = "Prepared by Lena Fischer"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Goals"
    body = second.placeholders[1].text_frame
    body.text = "Move the archive to Porto"
    detail = body.add_paragraph()
    detail.text, detail.level = "Before the lease ends in March", 1
    second.notes_slide.notes_text_frame.text = "Ask Bruno about the movers."
    third = deck.slides.add_slide(deck.slide_layouts[5])
    third.shapes.title.text = "Boxes per room"
    third.shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(1)).text_frame.text = "Counted on Friday."
    table = third.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(1.5)).table
    for (r, c), text in {(0, 0): "Room", (0, 1): "Boxes", (1, 0): "Library", (1, 1): "40",
                         (2, 0): "Office", (2, 1): "12"}.items():
        table.cell(r, c).text = text
    fourth = deck.slides.add_slide(deck.slide_layouts[5])
    fourth.shapes.title.text = "Costs"
    data = CategoryChartData()
    data.categories = ["Truck", "Storage"]
    data.add_series("EUR", (1800, 350))
    frame = fourth.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(2), Inches(6), Inches(4), data)
    chart = frame.chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Moving costs"
    buffer = io.BytesIO()
    deck.save(buffer)
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
    assert onboarding.startswith("# Onboarding"), "headings kept"
    assert "| Tool | Owner |\n| --- | --- |\n| Airflow | Omar |" in onboarding, "a table, its first row the header"
    assert "| Monday | 9:00 |" in http.get(f"/v1/default/banks/{bank_id}/documents/hours").json()["original_text"]
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "Who serviced the boiler?"})
    assert "Nadia" in recalled.json()["results"][0]["text"]


HTML_PAGE = b"""<html><head><title>Team</title><style>p { color: red }</style></head>
<body><script>track('visit')</script><h1>Team page</h1><p>Ravi <b>leads</b> the data_platform project.</p>
<ul><li>Standup at 9:30</li><li>Retro on Fridays</li></ul>
<table><tr><th>Room</th><th>Floor</th></tr><tr><td>Kepler</td><td>3</td></tr></table>
<img src="data:image/png;base64,iVBORw0KGgo=" alt="team photo"></body></html>"""


def test_pptx_and_html_become_markdown(http: httpx.Client, bank_id: str) -> None:
    meta = {"files_metadata": [{"document_id": "plan"}, {"document_id": "team"}]}
    answer = upload(http, bank_id, [("plan.pptx", make_pptx(), PPTX_MEDIA), ("team.html", HTML_PAGE, "text/html")],
                    meta)
    assert answer.status_code == 200, answer.text
    results = [finish_operation(http, bank_id, op) for op in answer.json()["operation_ids"]]
    assert [r["status"] for r in results] == ["completed"] * 2, results
    text = http.get(f"/v1/default/banks/{bank_id}/documents/plan").json()["original_text"]
    assert text.startswith("# Relocation plan\n\nPrepared by Lena Fischer"), text
    goals = "# Goals\n\n- Move the archive to Porto\n  - Before the lease ends in March\n\n### Notes\n\nAsk Bruno"
    assert goals in text, "slide titles are headings, bullets keep their level, the notes follow"
    table = "| Room | Boxes |\n| --- | --- |\n| Library | 40 |\n| Office | 12 |"
    assert f"# Boxes per room\n\n{table}\n\nCounted on Friday." in text, "the table, above the text box"
    chart = "| Category | EUR |\n| --- | --- |\n| Truck | 1800 |\n| Storage | 350 |"
    assert text.endswith(f"# Costs\n\n### Chart: Moving costs\n\n{chart}"), "a chart as its cached data"
    assert text.index("# Relocation plan") < text.index("# Goals") < text.index("# Boxes per room")
    facts = http.get(f"/v1/default/banks/{bank_id}/memories/list", params={"document_id": "plan"}).json()["items"]
    assert any("Porto" in f["text"] for f in facts), facts

    page = http.get(f"/v1/default/banks/{bank_id}/documents/team").json()["original_text"]
    assert page.startswith("# Team page\n\nRavi **leads** the data_platform project."), page
    assert "- Standup at 9:30\n- Retro on Fridays" in page and "| Room | Floor |\n| --- | --- |\n| Kepler | 3 |" in page
    assert "track(" not in page and "color" not in page and "base64" not in page, "no script, style or image bytes"
    assert page.endswith("![team photo]()"), "an inline image keeps its alt text"


def test_unreadable_file_fails_its_operation_with_the_reason(http: httpx.Client, bank_id: str) -> None:
    answer = upload(http, bank_id, [("broken.pdf", b"%PDF-1.4 this is not really a pdf", "application/pdf"),
                                    ("fine.txt", b"The parking lot closes at 22:00.", "text/plain"),
                                    ("broken.pptx", b"PK\x03\x04 not a zip", PPTX_MEDIA)])
    assert answer.status_code == 200, answer.text
    broken, fine, slides = (finish_operation(http, bank_id, op) for op in answer.json()["operation_ids"])
    assert broken["status"] == "failed" and "broken.pdf" in broken["error_message"]
    assert "PDF" in broken["error_message"]
    assert fine["status"] == "completed", "one bad file does not stop the others"
    assert slides["status"] == "failed" and "PPTX" in slides["error_message"], slides


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
