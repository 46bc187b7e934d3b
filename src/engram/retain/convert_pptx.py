"""PPTX to markdown with the standard library (zipfile + ElementTree), for POST …/files/retain.

python-pptx would bring lxml and Pillow (34 MB installed) to read what is a zip of XML parts; this
reads the parts it needs directly. Slides come in the order of presentation.xml's slide list; each
is a `# title` heading (`# Slide N` without one), then its shapes in reading order (top to bottom,
left to right, a placeholder placed by its layout where the slide gives no position): text as
paragraphs, bulleted placeholders as `-` lists indented by level, tables and charts (their cached
data) as markdown tables, pictures by their alt text; the speaker notes last, under `### Notes`.
Errors are ValueError, zipfile.BadZipFile, KeyError or ElementTree.ParseError; the caller names the
file."""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Callable
from xml.etree import ElementTree as ET

from engram.retain.convert import markdown_table

NS = {
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}
R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
# One XML part unpacked past this is refused: a small upload must not inflate into gigabytes in memory.
MAX_PART_BYTES = 64 * 1024 * 1024
TITLE_TYPES = {"title", "ctrTitle"}
BULLETED_TYPES = {"body", "obj"}  # a placeholder without a type is "obj" (content)


def _tag(prefix: str, name: str) -> str:
    return f"{{{NS[prefix]}}}{name}"


class _Package:
    """The parts of an OPC zip (the container of every Office Open XML file) and their relationships."""

    def __init__(self, data: bytes) -> None:
        self.zip = zipfile.ZipFile(io.BytesIO(data))

    def xml(self, name: str) -> ET.Element | None:
        try:
            info = self.zip.getinfo(name)
        except KeyError:
            return None
        if info.file_size > MAX_PART_BYTES:
            raise ValueError(f"its part {name} is over {MAX_PART_BYTES // 2**20} MB unpacked")
        return ET.fromstring(self.zip.read(info))

    def rels(self, part: str) -> dict[str, tuple[str, str]]:
        """rId → (relationship type's last word, target part name) for one part."""
        folder, name = posixpath.split(part)
        root = self.xml(f"{folder}/_rels/{name}.rels")
        found = {}
        for rel in [] if root is None else root.findall("rel:Relationship", NS):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target", "")
            target = target.lstrip("/") if target.startswith("/") else posixpath.normpath(f"{folder}/{target}")
            found[rel.get("Id", "")] = (rel.get("Type", "").rsplit("/", 1)[-1], target)
        return found

    def related(self, part: str, kind: str) -> str | None:
        return next((target for k, target in self.rels(part).values() if k == kind), None)


def _placeholder(shape: ET.Element) -> ET.Element | None:
    return shape.find("./*/p:nvPr/p:ph", NS)


def _offset(shape: ET.Element) -> tuple[int, int] | None:
    for path in ("p:spPr/a:xfrm/a:off", "p:grpSpPr/a:xfrm/a:off", "p:xfrm/a:off"):
        off = shape.find(path, NS)
        if off is not None:
            return int(off.get("y", 0)), int(off.get("x", 0))
    return None


def _layout_offsets(package: _Package, layout: str | None) -> dict[str, tuple[int, int]]:
    """Where the slide layout puts its placeholders, by "idx:N" and by "type:T"."""
    root = package.xml(layout) if layout else None
    found: dict[str, tuple[int, int]] = {}
    for shape in [] if root is None else root.iter(_tag("p", "sp")):
        ph, offset = _placeholder(shape), _offset(shape)
        if ph is not None and offset is not None:
            found.setdefault(f"idx:{ph.get('idx', '0')}", offset)
            found.setdefault(f"type:{ph.get('type', 'obj')}", offset)
    return found


def _paragraphs(body: ET.Element | None, bulleted: bool) -> list[str]:
    lines = []
    for para in [] if body is None else body.findall("a:p", NS):
        pieces = []
        for el in para:
            if el.tag in (_tag("a", "r"), _tag("a", "fld")):
                pieces.append("".join(t.text or "" for t in el.findall("a:t", NS)))
            elif el.tag == _tag("a", "br"):
                pieces.append("\n")
        text = "".join(pieces).strip()
        if not text:
            continue
        props = para.find("a:pPr", NS)
        level = int(props.get("lvl", 0)) if props is not None else 0
        if props is not None and props.find("a:buNone", NS) is not None:
            marker = ""
        elif props is not None and props.find("a:buAutoNum", NS) is not None:
            marker = "1. "
        elif bulleted or (props is not None and props.find("a:buChar", NS) is not None):
            marker = "- "
        else:
            marker = ""
        indent = "  " * level if marker else ""
        lines.append(indent + marker + text.replace("\n", "\n" + indent + " " * len(marker)))
    return lines


def _cells(cell: ET.Element) -> str:
    return " ".join(_paragraphs(cell.find("a:txBody", NS), bulleted=False))


def _table(table: ET.Element) -> str:
    rows = [[_cells(tc) for tc in tr.findall("a:tc", NS)] for tr in table.findall("a:tr", NS)]
    return markdown_table(rows)


def _chart(package: _Package, part: str | None) -> str:
    """A chart as its title and the data cached in it: a row per category, a column per series."""
    root = package.xml(part) if part else None
    if root is None:
        return ""
    title = " ".join(t.text or "" for t in root.iterfind("c:chart/c:title//a:t", NS)).strip()
    columns: list[tuple[str, dict[str, str]]] = []
    categories: dict[str, str] = {}
    for number, series in enumerate(root.iter(_tag("c", "ser")), 1):
        name = "".join(v.text or "" for v in series.iterfind("c:tx//c:v", NS)) or f"Series {number}"
        for point in series.iterfind("c:cat//c:pt", NS):
            categories.setdefault(point.get("idx", ""), point.findtext("c:v", "", NS))
        values = {point.get("idx", ""): point.findtext("c:v", "", NS) for point in series.iterfind("c:val//c:pt", NS)}
        columns.append((name, values))
    indexes = sorted({i for _, values in columns for i in values} | set(categories), key=lambda i: int(i or 0))
    rows = [["Category"] + [name for name, _ in columns]]
    rows += [[categories.get(i, "")] + [values.get(i, "") for _, values in columns] for i in indexes]
    heading = f"### Chart: {title}" if title else "### Chart"
    return "\n\n".join(part for part in (heading, markdown_table(rows) if columns else "") if part)


def _ordered(shapes: list[ET.Element], layout: dict[str, tuple[int, int]]) -> list[ET.Element]:
    def position(shape: ET.Element) -> tuple[int, int]:
        ph = _placeholder(shape)
        inherited = None if ph is None else (layout.get(f"idx:{ph.get('idx')}") or
                                              layout.get(f"type:{ph.get('type', 'obj')}"))
        return _offset(shape) or inherited or (-1, -1)

    return sorted(shapes, key=position)  # stable: shapes with no position keep document order


def _blocks(package: _Package, slide: str, tree: ET.Element, layout: dict[str, tuple[int, int]],
            title: list[str]) -> list[str]:
    """The markdown blocks of one shape tree (a slide's, or a group's); the title goes to `title`."""
    rels = package.rels(slide)
    blocks: list[str] = []

    def text_shape(shape: ET.Element) -> str:
        ph = _placeholder(shape)
        kind = None if ph is None else ph.get("type", "obj")
        lines = _paragraphs(shape.find("p:txBody", NS), bulleted=kind in BULLETED_TYPES)
        if kind in TITLE_TYPES and not title:
            title.append(" ".join(lines))
            return ""
        return "\n".join(lines)

    def frame(shape: ET.Element) -> str:
        table = shape.find("a:graphic/a:graphicData/a:tbl", NS)
        if table is not None:
            return _table(table)
        chart = shape.find("a:graphic/a:graphicData/c:chart", NS)
        return "" if chart is None else _chart(package, rels.get(chart.get(R_ID, ""), ("", None))[1])

    def picture(shape: ET.Element) -> str:
        described = shape.find("p:nvPicPr/p:cNvPr", NS)
        alt = "" if described is None else (described.get("descr") or "").strip()
        return f"![{alt}]()" if alt else ""

    def group(shape: ET.Element) -> str:
        return "\n\n".join(_blocks(package, slide, shape, layout, title))

    handlers: dict[str, Callable[[ET.Element], str]] = {
        _tag("p", "sp"): text_shape, _tag("p", "graphicFrame"): frame, _tag("p", "pic"): picture,
        _tag("p", "grpSp"): group}
    for shape in _ordered([el for el in tree if el.tag in handlers], layout):
        block = handlers[shape.tag](shape).strip()
        if block:
            blocks.append(block)
    return blocks


def _notes(package: _Package, slide: str) -> str:
    part = package.related(slide, "notesSlide")
    root = package.xml(part) if part else None
    lines = []
    for shape in [] if root is None else root.iter(_tag("p", "sp")):
        ph = _placeholder(shape)
        if ph is not None and ph.get("type") == "body":
            lines += _paragraphs(shape.find("p:txBody", NS), bulleted=False)
    return "\n".join(lines)


def _slide(package: _Package, part: str, number: int) -> str:
    root = package.xml(part)
    tree = None if root is None else root.find("p:cSld/p:spTree", NS)
    if tree is None:
        return ""
    layout = _layout_offsets(package, package.related(part, "slideLayout"))
    title: list[str] = []
    blocks = _blocks(package, part, tree, layout, title)
    notes = _notes(package, part)
    if notes:
        blocks.append(f"### Notes\n\n{notes}")
    return "\n\n".join([f"# {title[0] if title and title[0] else f'Slide {number}'}", *blocks])


def pptx_to_markdown(data: bytes) -> str:
    package = _Package(data)
    presentation = package.xml("ppt/presentation.xml")
    if presentation is None:
        raise ValueError("it has no ppt/presentation.xml (not a presentation)")
    rels = package.rels("ppt/presentation.xml")
    slides = [rels[el.get(R_ID, "")][1] for el in presentation.iterfind("p:sldIdLst/p:sldId", NS)
              if el.get(R_ID, "") in rels]
    return "\n\n".join(text for number, part in enumerate(slides, 1) if (text := _slide(package, part, number)))
