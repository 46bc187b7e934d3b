"""Files to markdown, for POST …/files/retain: PDF, DOCX, PPTX, XLSX, HTML, Markdown, plain text, CSV
and JSON. DOCX, PPTX and HTML go through markitdown (headings, lists, tables and emphasis kept);
PDF through pypdf and XLSX through openpyxl, which read those as well for a fraction of the install
(markitdown's PDF and XLSX extras bring pdfminer, pdfplumber, pypdfium2 and pandas). Why, with the
figures, in the README. Converters are imported on first use: the request path never loads them."""

from __future__ import annotations

import csv
import io
import json
import re
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


def markdown_table(rows: list[list[Any]]) -> str:
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
        table = markdown_table([list(row) for row in sheet.iter_rows(values_only=True)])
        if table:
            parts.append(f"## {sheet.title}\n\n{table}")
    return "\n\n".join(parts)


def _html_to_markdown(html: str | bytes) -> str:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    class Converter(MarkdownConverter):
        def convert_img(self, el: Any, text: str, parent_tags: set[str]) -> str:
            """An inline image (data: URI) keeps only its alt text: its bytes are no memory."""
            src = el.attrs.get("src") or ""
            if src and not src.startswith("data:"):
                return super().convert_img(el, text, parent_tags)
            alt = (el.attrs.get("alt") or "").strip()
            return f"![{alt}]()" if alt else ""

        def convert_a(self, el: Any, text: str, parent_tags: set[str]) -> str:
            if (el.get("href") or "").strip().lower().startswith("javascript:"):
                return text
            return super().convert_a(el, text, parent_tags)

    soup = BeautifulSoup(html, "html.parser")  # markdownify drops <script> and <style> itself
    converter = Converter(heading_style="atx", bullets="-", table_infer_header=True,
                          escape_asterisks=False, escape_underscores=False)
    text = converter.convert_soup(soup.body or soup)
    return re.sub(r"\n{3,}", "\n\n", text)


def _docx(data: bytes) -> str:
    import mammoth
    from mammoth.images import img_element

    try:  # images become their alt text, not data: URIs
        result = mammoth.convert_to_html(io.BytesIO(data), convert_image=img_element(lambda image: {"src": ""}))
    except Exception as exc:  # mammoth raises zip, XML and key errors for a damaged file
        raise ConversionFailed(f"not a readable DOCX document ({type(exc).__name__}: {exc})") from None
    return _html_to_markdown(result.value)


def _pptx(data: bytes) -> str:
    from xml.etree.ElementTree import ParseError
    from zipfile import BadZipFile

    from engram.retain.convert_pptx import pptx_to_markdown

    try:
        return pptx_to_markdown(data)
    except (BadZipFile, ParseError, KeyError, ValueError) as exc:
        raise ConversionFailed(f"not a readable PPTX presentation ({type(exc).__name__}: {exc})") from None


def _csv(data: bytes) -> str:
    text = _decode(data)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return markdown_table(list(csv.reader(io.StringIO(text), dialect)))


def _json(data: bytes) -> str:
    text = _decode(data)
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError as exc:
        raise ConversionFailed(f"not valid JSON ({exc})") from None


def to_markdown(fmt: str, data: bytes) -> str:
    """The file's content as markdown; ConversionFailed when it cannot be read or holds no text."""
    converters = {"pdf": _pdf, "xlsx": _xlsx, "docx": _docx, "pptx": _pptx, "html": _html_to_markdown,
                  "csv": _csv, "json": _json}
    text = converters.get(fmt, _decode)(data)
    if not text.strip():
        raise ConversionFailed("no text could be extracted (a scanned PDF or an image needs OCR, which is not set up)")
    return text.strip()
