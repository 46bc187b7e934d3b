"""The transfer ZIP of Hindsight 1.1.0, as a value: reading it (checked) and writing it.

Layout (schema_version 1): `manifest.json`; `banks.json` (the bank row: name, mission, disposition and
config, JSON values serialized as strings); `documents/000000.json`… (a document with its chunks and
facts; facts carry entity names and causal relations by position); `observations.json` (sources by
document id and fact position); `mental_models.json`, `mental_model_history.json`, `directives.json`,
`webhooks.json`, `knowledge_pages.json`; `data/*.json` (the source server's operation log and queues).
Embeddings and database ids never travel: the importer re-embeds with its own model.

Engram adds what Hindsight's archive has no place for, as extra keys Hindsight ignores: a fact's
`labels`, `fact_kind`, `state`…; an observation's `history` and `evidence`; the bank's config as it is
(`engram_config` on the bank row); `links.json` (every link between facts, so an Engram archive
restores the graph as it was rather than rebuilt); and attachments as `attachments.json` (metadata)
plus one `attachments/<id>` entry of bytes each."""

from __future__ import annotations

import io
import itertools
import json
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from engram.errors import InvalidInput
from engram.transfer.zip_directory import compact_directory, compact_read_directory

SCHEMA_VERSION = 1
# Refused before anything is inflated, against ZIP bombs. The entries held in memory while an archive
# is imported (all but the documents, links.json and observations.json) may inflate to
# MAX_UNCOMPRESSED_BYTES in all. The documents (each parsed alone), links.json and observations.json
# (read an item at a time) are bounded only by inflating at most MAX_INFLATION times their compressed
# size (Engram's compress ~3-5:1), a document to MAX_DOCUMENT_BYTES, and a line of links.json (one
# link) to MAX_LINK_LINE_CHARS, of observations.json to MAX_OBSERVATION_LINE_CHARS.
MAX_UNCOMPRESSED_BYTES = 2 * 1024**3
MAX_INFLATION = 100
MAX_DOCUMENT_BYTES = 256 * 1024**2
MAX_LINK_LINE_CHARS = 64 * 1024
MAX_OBSERVATION_LINE_CHARS = 16 * 1024**2  # an observation a line of observations.json
LINK_BATCH = 20_000  # links read, written or inserted per step: memory stays flat whatever the bank's size
TABLE_FILES = ("mental_models", "mental_model_history", "directives", "webhooks", "knowledge_pages")


@dataclass
class Archive:
    manifest: dict[str, Any]
    banks: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] | DocumentsEntry = field(default_factory=list)  # read: parsed as iterated
    observations: list[dict[str, Any]] | ObservationsEntry = field(default_factory=list)  # read: as iterated
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # TABLE_FILES
    attachments: list[dict[str, Any]] = field(default_factory=list)  # metadata; bytes under "data"
    # Engram's: every link between facts, as it was (a list, or `LinksEntry` from a read archive)
    links: list[dict[str, Any]] | LinksEntry | None = None

    @property
    def source_bank_id(self) -> str:
        return str(self.manifest.get("source_bank_id") or "")

    def table(self, name: str) -> list[dict[str, Any]]:
        return self.tables.get(name, [])


def decoded(value: Any) -> Any:
    """A JSON column as found in `banks.json` and the table files: serialized (a string) or not."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _json(zf: zipfile.ZipFile, name: str, default: Any) -> Any:
    try:
        raw = zf.read(name)
    except KeyError:
        return default
    return _parsed(name, raw)


def _parsed(name: str, raw: str | bytes) -> Any:
    """An entry's JSON, parsed whole; not JSON, it refuses the archive naming the entry."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidInput("file", f"{name} in the archive is not JSON: {exc}") from None


def _parsed_lines(name: str, second: str, following: Iterable[str], max_chars: int) -> Iterator[dict[str, Any]]:
    """The items of an entry written an item a line (`_an_item_a_line`), from its second line on, each
    parsed alone. A line that is not a JSON object, or is longer than `max_chars`, is refused by its
    number."""
    for number, line in enumerate(itertools.chain([second], following), 2):
        if len(line) > max_chars and not line.endswith("\n"):
            raise InvalidInput("file", f"{name} in the archive, line {number}, is longer than {max_chars} characters")
        line = line.strip().rstrip(",")
        if line in ("", "]"):
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise InvalidInput("file", f"{name} in the archive, line {number}, is not JSON: {exc}") from None
        if not isinstance(item, dict):
            raise InvalidInput("file", f"{name} in the archive, line {number}, is not a JSON object")
        yield item


def _streamed(name: str) -> bool:
    """Whether the entry is read alone or in parts (not held with the rest): a document, links.json,
    observations.json."""
    return name in ("links.json", "observations.json") or (name.startswith("documents/") and name.endswith(".json"))


def _check_sizes(zf: zipfile.ZipFile) -> None:
    entries = zf.infolist()
    if sum(info.file_size for info in entries if not _streamed(info.filename)) > MAX_UNCOMPRESSED_BYTES:
        raise InvalidInput("file", f"the archive inflates to more than {MAX_UNCOMPRESSED_BYTES} bytes")
    for info in entries:
        if not _streamed(info.filename):
            continue
        if info.file_size > MAX_INFLATION * max(info.compress_size, 1024):
            raise InvalidInput("file", f"{info.filename} inflates more than {MAX_INFLATION} times: not a"
                                       " transfer archive's")
        if info.filename.startswith("documents/") and info.file_size > MAX_DOCUMENT_BYTES:
            raise InvalidInput("file", f"{info.filename} inflates to more than {MAX_DOCUMENT_BYTES} bytes")


def read_archive(source: bytes | IO[bytes], *, check_documents: bool = True) -> Archive:
    """The archive in `source`: its bytes, or a seekable binary file, which must stay open while the
    archive's documents, links and observations are read (they are read from it when iterated, through
    one `ZipFile` whose directory is kept compact: `compact_read_directory`). `check_documents`: parse
    every document now, so that a broken one is refused at once (an upload); otherwise a broken
    document stops whoever iterates them (the import, which then rolls back). The observations are
    always read through once, each checked, and counted."""
    file = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    try:
        zf = zipfile.ZipFile(file)
    except zipfile.BadZipFile:
        raise InvalidInput("file", "not a ZIP archive (expected a Hindsight/Engram transfer archive)") from None
    try:
        _check_sizes(zf)
        names = set(zf.namelist())
        compact_read_directory(zf)
        manifest = _json(zf, "manifest.json", None)
        if not isinstance(manifest, dict):
            raise InvalidInput("file", "the archive has no manifest.json: not a transfer archive")
        if manifest.get("schema_version") != SCHEMA_VERSION:
            raise InvalidInput("file", f"unsupported archive schema_version {manifest.get('schema_version')!r}"
                                       f" (expected {SCHEMA_VERSION})")
        documents = DocumentsEntry(zf, sorted(n for n in names if n.startswith("documents/") and n.endswith(".json")))
        if check_documents:
            for _ in documents:
                pass
        observations: list[dict[str, Any]] | ObservationsEntry = []
        if "observations.json" in names:
            observations = ObservationsEntry(zf)
            observations.count()
        attachments = _json(zf, "attachments.json", [])
        for meta in attachments:
            try:
                meta["data"] = zf.read(meta["path"])
            except KeyError:
                raise InvalidInput("file", f"attachment {meta.get('id')} has no bytes in the archive") from None
        return Archive(
            manifest=manifest,
            banks=_json(zf, "banks.json", []),
            documents=documents,
            observations=observations,
            tables={name: _json(zf, f"{name}.json", []) for name in TABLE_FILES},
            attachments=attachments,
            links=LinksEntry(zf) if "links.json" in names else None,
        )
    except BaseException:
        zf.close()
        raise


class DocumentsEntry:
    """An archive's `documents/*.json`, each parsed when iteration reaches it: a 100,000-document
    archive held whole took ~1 GB. Iterating checks that each is a document with an id."""

    def __init__(self, zf: zipfile.ZipFile, names: list[str]) -> None:
        self._zf = zf
        self._names = names

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for name in self._names:
            document = _json(self._zf, name, {})
            if not isinstance(document, dict) or not isinstance(document.get("id"), str):
                raise InvalidInput("file", f"{name} in the archive has no document id")
            yield document


def _an_item_a_line(first: str, second: str) -> bool:
    """Whether a JSON array entry is as Engram writes it: `[`, then each item whole on a line of its own."""
    item = second.strip().rstrip(",")
    return first.strip() == "[" and (item in ("", "]") or (item.startswith("{") and item.endswith("}")))


class ArrayEntry:
    """An archive's entry holding one JSON array of objects, read a batch at a time when iterated, so
    that neither the whole file nor its items are ever in memory at once, and no `json.loads` holds
    the GIL (and with it the event loop) for more than an item. Engram writes one item a line; any
    other layout (Hindsight's archives, older Engram's) is parsed whole, up to
    MAX_UNCOMPRESSED_BYTES. The archive's file must stay open while the entry is read."""

    name = ""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self._zf = zf

    @property
    def max_line_chars(self) -> int:
        raise NotImplementedError

    @contextmanager
    def _opened(self) -> Iterator[tuple[str, str, Iterator[str]]]:
        """The entry open: its first two lines, and an iterator over the lines after them (no line
        read past `max_line_chars`)."""
        with self._zf.open(self.name) as raw:
            lines = io.TextIOWrapper(raw, encoding="utf-8")
            limit = self.max_line_chars + 1
            first, second = lines.readline(limit), lines.readline(limit)
            yield first, second, iter(lambda: lines.readline(limit), "")

    def batches(self, size: int) -> Iterator[list[dict[str, Any]]]:
        with self._opened() as (first, second, following):
            if not _an_item_a_line(first, second):
                items = self._whole(first, second, following)
                yield from (items[i:i + size] for i in range(0, len(items), size))
                return
            batch: list[dict[str, Any]] = []
            for item in _parsed_lines(self.name, second, following, self.max_line_chars):
                batch.append(item)
                if len(batch) == size:
                    yield batch
                    batch = []
            if batch:
                yield batch

    def count_items(self) -> int:
        """How many items the entry holds: its lines counted, none parsed, when it is an item a line
        (5.15 million links: ~3.8 s), else parsed whole."""
        with self._opened() as (first, second, following):
            if not _an_item_a_line(first, second):
                return len(self._whole(first, second, following))
            return sum(1 for line in itertools.chain([second], following) if line.strip().rstrip(",") not in ("", "]"))

    def _whole(self, first: str, second: str, following: Iterator[str]) -> list[dict[str, Any]]:
        """The entry parsed whole (not written an item a line), if it is small enough."""
        if self._zf.getinfo(self.name).file_size > MAX_UNCOMPRESSED_BYTES:
            raise InvalidInput("file", f"{self.name} in the archive is not one item a line and inflates to more"
                                       f" than {MAX_UNCOMPRESSED_BYTES} bytes")
        items = _parsed(self.name, first + second + "".join(following))
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise InvalidInput("file", f"{self.name} in the archive is not a JSON array of objects")
        return items

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.batches(LINK_BATCH):
            yield from batch


class LinksEntry(ArrayEntry):
    """An archive's `links.json`: a 100,000-memory bank's ~5 million links, parsed at once, took
    gigabytes."""

    name = "links.json"

    @property
    def max_line_chars(self) -> int:
        return MAX_LINK_LINE_CHARS


class ObservationsEntry(ArrayEntry):
    """An archive's `observations.json`. Held parsed through an import, 50,000 observations (31 MB)
    were ~250,000 objects that every full garbage collection walked (~0.2 s, a wait for every request,
    every few seconds). They are counted (and checked) when the archive is read (`count`, on the
    reader's thread), for the import's progress."""

    name = "observations.json"

    def __init__(self, zf: zipfile.ZipFile) -> None:
        super().__init__(zf)
        self._count = 0

    @property
    def max_line_chars(self) -> int:
        return MAX_OBSERVATION_LINE_CHARS

    def count(self) -> int:
        """Reads the entry through once, each observation parsed and checked, and keeps their number:
        a broken one is refused by its place before anything is imported."""
        self._count = 0
        for batch in self.batches(LINK_BATCH):
            for number, observation in enumerate(batch, self._count + 1):
                _check_observation(number, observation)
            self._count += len(batch)
        return self._count

    def __len__(self) -> int:
        return self._count


def _check_observation(number: int, observation: dict[str, Any]) -> None:
    """What the importer reads of an observation without a default: its text, and its sources' and
    history's shapes."""
    where = f"observation {number} in observations.json"
    if not isinstance(observation.get("text"), str):
        raise InvalidInput("file", f"{where} has no text")
    for key in ("sources", "evidence", "history"):
        items = observation.get(key) or []
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise InvalidInput("file", f"{where}: {key} is not a list of objects")
    if not all(isinstance(past.get("text"), str) for past in observation.get("history") or []):
        raise InvalidInput("file", f"{where}: a version in its history has no text")


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, default=_default, ensure_ascii=False)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class _JsonArray:
    """A ZIP entry holding one JSON array written as it comes: `[`, each item on a line of its own
    (one JSON object with no line break in it), `]`."""

    def __init__(self, zf: zipfile.ZipFile, name: str) -> None:
        self._file = io.TextIOWrapper(zf.open(name, "w", force_zip64=True), encoding="utf-8")
        self._file.write("[")
        self.count = 0

    def add(self, lines: list[str]) -> None:
        if lines:
            self._file.write((",\n" if self.count else "\n") + ",\n".join(lines))
            self.count += len(lines)

    def close(self) -> None:
        self._file.write("\n]\n")
        self._file.close()


def _line(value: Any) -> str:
    return json.dumps(value, default=_default, ensure_ascii=False)


class ArchiveWriter:
    """Writes an archive into a file entry by entry: its documents a batch at a time (`add_documents`,
    with their attachments), its observations a batch at a time (`add_observations`) or with the rest
    of its contents (`write_tables`), then its links a batch at a time (`add_links`, `add_link_lines`),
    then the manifest (`finish`). `observations.json` and `links.json` are each one JSON array
    written as it comes. A bank's documents, observations and links are most of its archive, so none
    needs to be in memory at once. Synchronous: callers run it off the event loop."""

    def __init__(self, file: IO[bytes]) -> None:
        self._zf = compact_directory(zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED))  # an entry a document
        self._documents = 0
        self._attachments: list[dict[str, Any]] = []
        self._observations: _JsonArray | None = None
        self._links: _JsonArray | None = None

    @property
    def observations_written(self) -> int:
        return self._observations.count if self._observations is not None else 0

    @property
    def links_written(self) -> int:
        return self._links.count if self._links is not None else 0

    def write_contents(self, archive: Archive) -> None:
        """Everything but the manifest, the links too when the archive holds them."""
        self.add_documents(archive.documents, archive.attachments)
        self.write_tables(archive)
        if archive.links is not None:
            self.add_links(archive.links)

    def add_documents(self, documents: Iterable[dict[str, Any]], attachments: Iterable[dict[str, Any]] = ()) -> None:
        """Documents, numbered on from the last batch, and attachments (metadata, bytes under "data")."""
        for document in documents:
            self._zf.writestr(f"documents/{self._documents:06d}.json", _dump(document))
            self._documents += 1
        for meta in attachments:
            self._zf.writestr(meta["path"], meta["data"])
            self._attachments.append({k: v for k, v in meta.items() if k != "data"})

    def add_observations(self, observations: Iterable[dict[str, Any]]) -> None:
        """Observations, after the documents and before `write_tables` (which then leaves them be)."""
        if self._observations is None:
            self._observations = _JsonArray(self._zf, "observations.json")
        self._observations.add([_line(observation) for observation in observations])

    def write_tables(self, archive: Archive) -> None:
        """The observations (unless added a batch at a time), the bank's row and its config tables
        (after the documents, before the links)."""
        if self._observations is None:
            self._zf.writestr("observations.json", _dump(archive.observations))
        else:
            self._observations.close()
        for name in TABLE_FILES:
            self._zf.writestr(f"{name}.json", _dump(archive.table(name)))
        self._zf.writestr("banks.json", _dump(archive.banks))

    def add_links(self, links: Iterable[dict[str, Any]]) -> None:
        self.add_link_lines([_line(link) for link in links])

    def add_link_lines(self, lines: list[str]) -> None:
        """Links already serialized, one JSON object each with no line break in it (an export's links,
        which PostgreSQL writes: `transfer_reads.link_lines`)."""
        if self._links is None:
            self._links = _JsonArray(self._zf, "links.json")
        self._links.add(lines)

    def finish(self, manifest: dict[str, Any]) -> None:
        if self._links is not None:
            self._links.close()
        if self._attachments:
            self._zf.writestr("attachments.json", _dump(self._attachments))
        self._zf.writestr("manifest.json", _dump(manifest))
        self._zf.close()


def manifest_of(source_bank_id: str, archive: Archive, counts: dict[str, int], *, archive_type: str,
                scope: dict[str, bool]) -> dict[str, Any]:
    """The manifest, with the document, fact and attachment counts given (`counts`: an export writes
    its documents a batch at a time, so `archive` holds the rest only)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "source_bank_id": source_bank_id,
        "exported_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "document_count": counts["document_count"],
        "fact_count": counts["fact_count"],
        "observation_count": counts.get("observation_count", len(archive.observations)),
        "link_count": counts.get("link_count", 0),  # Engram's: the lines of links.json, for an import's progress
        "mental_model_count": len(archive.table("mental_models")),
        "knowledge_page_count": 0,
        "archive_type": archive_type,
        "directive_count": len(archive.table("directives")),
        "webhook_count": 0,
        "includes_history": False,
        "scope": scope,
        "attachment_count": counts["attachment_count"],
        "operation_count": 0,
        "invalidated_memory_count": 0,
        "bank_rows_json_encoding": "serialized",
        "producer": "engram",
    }
