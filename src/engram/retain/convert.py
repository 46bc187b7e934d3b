"""Files to markdown, for POST …/files/retain: PDF, DOCX, PPTX, XLSX, HTML, Markdown, plain text, CSV
and JSON. DOCX, PPTX and HTML go through markitdown (headings, lists, tables and emphasis kept);
PDF through pypdf and XLSX through openpyxl, which read those as well for a fraction of the install
(markitdown's PDF and XLSX extras bring pdfminer, pdfplumber, pypdfium2 and pandas). Why, with the
figures, in the README. Converters are imported on first use: the request path never loads them."""

from __future__ import annotations

import csv
import io
import json
import threading
from pathlib import PurePosixPath
from typing import Any

EXTENSIONS = {
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".html": "html", ".htm": "html",
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text", ".csv": "csv", ".json": "json",
}
MEDIA_TYPES = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html", "text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text",
    "text/csv": "csv", "application/json": "json",
}
FORMAT_MEDIA_TYPES = {fmt: media for media, fmt in MEDIA_TYPES.items()} | {"markdown": "text/markdown"}


class ConversionFailed(Exception):
    """The file is of a known type but could not be read; the message says why."""


def file_format(filename: str, media_type: str | None) -> str | None:
    """The format of an uploaded file, by its extension first, then its declared media type."""
    found = EXTENSIONS.get(PurePosixPath(filename or "").suffix.lower())
    if found:
        return found
    return MEDIA_TYPES.get((media_type or "").split(";")[0].strip().lower())


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is None:
            raise ConversionFailed("the text is in no encoding that could be recognised") from None
        return str(best)


def _table(rows: list[list[Any]]) -> str:
    rows = [[("" if cell is None else str(cell)).replace("|", "\\|").replace("\n", " ") for cell in row]
            for row in rows if any(cell not in (None, "") for cell in row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ConversionFailed("the PDF is encrypted with a password")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ConversionFailed(f"not a readable PDF ({type(exc).__name__}: {exc})") from None


def _xlsx(data: bytes) -> str:
    from openpyxl import load_workbook

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds (zip, XML, key) for a damaged file
        raise ConversionFailed(f"not a readable XLSX workbook ({type(exc).__name__}: {exc})") from None
    parts = []
    for sheet in book.worksheets:
        table = _table([list(row) for row in sheet.iter_rows(values_only=True)])
        if table:
            parts.append(f"## {sheet.title}\n\n{table}")
    return "\n\n".join(parts)


_markitdown: Any = None
_markitdown_lock = threading.Lock()


def _with_markitdown(data: bytes, extension: str) -> str:
    global _markitdown
    from markitdown import MarkItDown, StreamInfo

    with _markitdown_lock:  # built once: it loads its file-type model
        if _markitdown is None:
            _markitdown = MarkItDown(enable_plugins=False)
    try:
        return _markitdown.convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=extension)).markdown
    except Exception as exc:  # markitdown wraps its converters' errors in several classes
        reason = f"could not convert the {extension[1:].upper()} file ({type(exc).__name__}: {exc})"
        raise ConversionFailed(reason) from None


def _csv(data: bytes) -> str:
    text = _decode(data)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return _table(list(csv.reader(io.StringIO(text), dialect)))


def _json(data: bytes) -> str:
    text = _decode(data)
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError as exc:
        raise ConversionFailed(f"not valid JSON ({exc})") from None


def to_markdown(fmt: str, data: bytes) -> str:
    """The file's content as markdown; ConversionFailed when it cannot be read or holds no text."""
    if fmt == "pdf":
        text = _pdf(data)
    elif fmt == "xlsx":
        text = _xlsx(data)
    elif fmt in ("docx", "pptx", "html"):
        text = _with_markitdown(data, "." + fmt)
    elif fmt == "csv":
        text = _csv(data)
    elif fmt == "json":
        text = _json(data)
    else:
        text = _decode(data)
    if not text.strip():
        raise ConversionFailed("no text could be extracted (a scanned PDF or an image needs OCR, which is not set up)")
    return text.strip()
