"""Transfers of big banks. An export writes its documents and links a batch at a time (1,000
documents and 20,000 links a step: a 100,000-memory bank has ~5 million links, which as one list took
gigabytes); here three of each a step, and every document, fact and link of the bank must still be in
the archive, each link's ends at their facts' places. An import reads, prepares and writes its
documents a batch at a time (1,000 in the server, three here), and still lands whole or not at all;
both show their progress once a batch. Links rebuilt for an archive without them go 10,000 facts per
statement (one here) and are the same links. An import holds one lock, its bank's writers lock, however
many documents and names it writes: it waits for the retains in flight and holds the next ones."""

from __future__ import annotations

import asyncio
import io
import math
import tempfile
import zipfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from engram import Memory
from engram.api.app import close_services, open_services
from engram.errors import InvalidInput
from engram.services import Services
from engram.settings import Settings
from engram.store import transfer_writes, writer_locks
from engram.transfer import export, handlers, import_documents, importer
from engram.transfer.archive import Archive, read_archive
from engram.transfer.importer import ImportOptions, import_archive

BANK = "harbour"


# The bank's links by their facts' texts (observations aside: an archive links facts only).
LINKS_BY_TEXT = """
    SELECT f.text, t.text, l.link_type, l.weight FROM memory_links l
    JOIN memory_units f ON f.id = l.from_unit JOIN memory_units t ON t.id = l.to_unit
    WHERE l.bank_id = $1 AND f.fact_type <> 'observation' AND t.fact_type <> 'observation' ORDER BY 1, 2, 3
"""


# Each observation with its sources' and its first quoted fact's texts.
OBSERVATION_SOURCES = """
    SELECT o.text, ARRAY(SELECT m.text FROM memory_units m WHERE m.id = ANY(o.source_memory_ids) ORDER BY 1),
           (SELECT m.text FROM memory_units m WHERE m.id = (o.evidence->0->>'fact_id')::uuid)
    FROM memory_units o WHERE o.bank_id = $1 AND o.fact_type = 'observation' ORDER BY 1
"""


def retain_logs(dsn: str, logs: dict[str, str]) -> None:
    """Each text retained as the document named, all on one day."""
    memory = Memory(database_url=dsn)
    try:
        for document_id, text in logs.items():
            memory.retain(BANK, text, document_id=document_id, timestamp="2026-06-01T09:00:00Z")
    finally:
        memory.close()


def retain_alike_facts(dsn: str) -> None:
    # alike facts on one day: semantic and temporal links
    retain_logs(dsn, {f"log-{n}": f"Ines repaired the red boat number {n} at the harbour on Monday." for n in range(4)})


async def exported_bytes(services: object, bank_id: str, progress: Any = None) -> bytes:
    with tempfile.TemporaryFile() as spool:
        await handlers.write_export(services, bank_id, {}, spool, progress)
        spool.seek(0)
        return spool.read()


async def exported(services: object, bank_id: str, progress: Any = None) -> Archive:
    return read_archive(await exported_bytes(services, bank_id, progress))


class Steps(list):
    """The progress an operation reports, as (stage, done, total)."""

    async def __call__(self, stage: str, done: int, total: int) -> None:
        self.append((stage, done, total))


@pytest.fixture
async def harbour(isolated_dsn: str) -> AsyncIterator[tuple[Services, asyncpg.Connection]]:
    """The services of a server (no worker) over a database with the four alike facts, and a connection."""
    retain_alike_facts(isolated_dsn)
    services = await open_services(Settings(database_url=isolated_dsn, worker_enabled=False))
    conn = await asyncpg.connect(isolated_dsn)
    try:
        yield services, conn
    finally:
        await conn.close()
        await close_services(services)


async def test_an_export_written_a_few_documents_and_links_at_a_time_holds_each_at_its_place(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    services, conn = harbour
    stored = await conn.fetch("SELECT from_unit, to_unit, link_type FROM memory_links WHERE bank_id = $1", BANK)
    assert len(stored) > 6, "more than two batches of three"
    facts = await conn.fetch("SELECT document_id, text FROM memory_units WHERE bank_id = $1", BANK)

    monkeypatch.setattr(export, "LINK_BATCH", 3)
    monkeypatch.setattr(export, "DOCUMENT_BATCH", 3)
    steps = Steps()
    archive = await exported(services, BANK, steps)

    # a step a batch: two of documents, then each batch of links once written, then the rest
    total = 1 + 4 + -(-len(stored) // 3)
    assert steps == [("exporting", done, total) for done in [0, 3, *range(4, total + 1)]]
    assert (archive.manifest["document_count"], archive.manifest["fact_count"]) == (4, 4)
    assert sorted((document["id"], fact["text"]) for document in archive.documents for fact in document["facts"]) \
        == sorted((row["document_id"], row["text"]) for row in facts)
    assert links_by_place(archive) == stored_links_by_place(archive, stored)


def retain_log_of_three_facts(dsn: str) -> None:
    # a document of three facts: their places in it are 0, 1 and 2
    retain_logs(dsn, {"log-3": "Ines repaired the red boat number 3 at the harbour on Monday. Marco painted the"
                               " blue boat at the harbour on Monday. Ines sailed the red boat out of the harbour"
                               " on Monday."})


async def three_facts_and_a_lone_one(services: Services, conn: asyncpg.Connection) -> list[Any]:
    """The ids of log-3's three facts (by text) and of log-2's one fact, log-3 retained first."""
    await asyncio.to_thread(retain_log_of_three_facts, services.settings.database_url)
    three = [r["id"] for r in await conn.fetch(
        "SELECT id FROM memory_units WHERE bank_id = $1 AND document_id = 'log-3' ORDER BY text", BANK)]
    return [*three, await conn.fetchval("SELECT id FROM memory_units WHERE bank_id = $1 AND document_id = 'log-2'",
                                        BANK)]


def links_by_place(archive: Archive) -> list[tuple[Any, ...]]:
    return sorted(((link["from"]["document_id"], link["from"]["fact_index"]),
                   (link["to"]["document_id"], link["to"]["fact_index"]), link["link_type"])
                  for link in archive.links or [])


def stored_links_by_place(archive: Archive, stored: list[asyncpg.Record]) -> list[tuple[Any, ...]]:
    """The stored links between two facts of the archive, each end by its document and place there."""
    place = {fact["source_id"]: (document["id"], index)
             for document in archive.documents for index, fact in enumerate(document["facts"])}
    return sorted((place[str(row["from_unit"])], place[str(row["to_unit"])], row["link_type"]) for row in stored
                  if str(row["from_unit"]) in place and str(row["to_unit"]) in place)


async def test_an_export_carries_each_facts_causes_by_their_place_in_its_document(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An export names a fact's causes by their places in its document, a batch of documents at a time
    # (one here); a cause in another document has no place there and is left out, as in Hindsight's
    # archive. An archive without links.json restores the causal links from them.
    services, conn = harbour
    first, second, third, lone = await three_facts_and_a_lone_one(services, conn)
    await conn.executemany(
        "INSERT INTO memory_links (from_unit, to_unit, bank_id, link_type, weight) VALUES ($1, $2, $3, 'causal', 1)",
        [(third, first, BANK), (third, second, BANK), (first, lone, BANK), (lone, third, BANK)])
    monkeypatch.setattr(export, "DOCUMENT_BATCH", 1)
    archive = await exported(services, BANK)
    facts = {document["id"]: document["facts"] for document in archive.documents}
    place = {fact["source_id"]: index for index, fact in enumerate(facts["log-3"])}
    causes = {fact["source_id"]: sorted(r["target_fact_index"] for r in fact["causal_relations"])
              for fact in facts["log-3"]}
    assert causes == {str(third): sorted([place[str(first)], place[str(second)]]), str(first): [], str(second): []}
    assert [fact["causal_relations"] for fact in facts["log-2"]] == [[]]
    assert all(not fact["causal_relations"] for key in facts if key not in ("log-2", "log-3") for fact in facts[key])

    archive.links = None
    await import_archive(services, archive, ImportOptions("restored"))
    causal = """SELECT f.text, t.text FROM memory_links l JOIN memory_units f ON f.id = l.from_unit
                JOIN memory_units t ON t.id = l.to_unit WHERE l.bank_id = $1 AND l.link_type = 'causal'
                AND f.document_id = t.document_id ORDER BY 1, 2"""
    restored = [tuple(r) for r in await conn.fetch(causal, "restored")]
    assert len(restored) == 2 and restored == [tuple(r) for r in await conn.fetch(causal, BANK)]


async def test_an_export_of_some_documents_holds_the_links_between_their_facts_only(
    harbour: tuple[Services, asyncpg.Connection]
) -> None:
    services, conn = harbour
    await asyncio.to_thread(retain_log_of_three_facts, services.settings.database_url)
    stored = await conn.fetch("SELECT from_unit, to_unit, link_type FROM memory_links WHERE bank_id = $1", BANK)
    with tempfile.TemporaryFile() as spool:
        await handlers.write_export(services, BANK, {"document_ids": ["log-1", "log-3"]}, spool)
        spool.seek(0)
        archive = read_archive(spool.read())
    assert sorted((document["id"], len(document["facts"])) for document in archive.documents) == [
        ("log-1", 1), ("log-3", 3)]
    expected = stored_links_by_place(archive, stored)
    assert len(expected) < len(stored), "links to the other documents' facts stay out"
    assert any({a[0], b[0]} == {"log-1", "log-3"} for a, b, _ in expected), "links between the two stay in"
    assert links_by_place(archive) == expected


# Document ids a link line must quote and escape: PostgreSQL writes the export's links.json lines.
AWKWARD_IDS = ['log "quoted" C:\\boats\\red', "log\nof two lines\tand a tab", "journal de bord é ☃ 🚢"]


async def test_links_between_documents_with_awkward_ids_export_and_restore_as_they_were(
    harbour: tuple[Services, asyncpg.Connection]
) -> None:
    services, conn = harbour
    await asyncio.to_thread(retain_logs, services.settings.database_url, {
        document_id: f"Ines repaired the red boat number {n + 7} at the harbour on Monday."
        for n, document_id in enumerate(AWKWARD_IDS)})
    stored = await conn.fetch("SELECT from_unit, to_unit, link_type FROM memory_links WHERE bank_id = $1", BANK)
    archive = await exported(services, BANK)
    assert {document["id"] for document in archive.documents} >= set(AWKWARD_IDS)
    by_place = links_by_place(archive)
    assert any(a[0] in AWKWARD_IDS and b[0] in AWKWARD_IDS for a, b, _ in by_place)
    assert by_place == stored_links_by_place(archive, stored)
    await import_archive(services, archive, ImportOptions("restored"))
    assert [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, "restored")] == \
        [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, BANK)]


class AdvisoryLocksSeen(list):
    """At each progress step of an import, how many advisory locks the other sessions hold."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        super().__init__()
        self.conn = conn

    async def __call__(self, stage: str, done: int, total: int) -> None:
        self.append(await self.conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"))


@pytest.mark.parametrize("mode", ["restore", "merge"])
async def test_an_import_holds_one_lock_however_many_documents_and_names_it_writes(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    # One lock per document and per entity name, held to the end of the import's one transaction,
    # filled PostgreSQL's lock table past ~13,000 and failed the import. Three documents a batch here:
    # after each batch, the import's session holds the bank's writers lock alone.
    services, conn = harbour
    monkeypatch.setattr(import_documents, "DOCUMENT_BATCH", 3)
    archive = await exported(services, BANK)
    assert any(fact["entities"] for document in archive.documents for fact in document["facts"])
    if mode == "merge":
        await import_archive(services, archive, ImportOptions("target"))
    locks = AdvisoryLocksSeen(conn)
    options = ImportOptions("target", mode=mode, document_conflict="replace")
    assert (await import_archive(services, archive, options, locks))["documents_imported"] == 4
    # reported after each batch of documents (3 and 1), after the links (one batch), and at the end
    assert locks == [1, 1, 1, 1, 0], "the writers lock alone, until the import commits"


async def test_an_import_waits_for_the_retains_in_flight_and_holds_the_next(
    harbour: tuple[Services, asyncpg.Connection]
) -> None:
    services, writer = harbour
    archive = await exported(services, BANK)
    await import_archive(services, archive, ImportOptions("merged"))  # the bank to merge into
    async with writer.transaction():  # a retain writing one document of the bank
        await writer_locks.lock_documents(writer, "merged", ["elsewhere"])
        merge = asyncio.ensure_future(
            import_archive(services, archive, ImportOptions("merged", mode="merge", document_conflict="replace")))
        await asyncio.sleep(1.5)
        assert not merge.done(), "the merge waits for the retain in flight"
    assert (await asyncio.wait_for(merge, 30))["documents_imported"] == 4

    holder = await asyncpg.connect(services.settings.database_url)
    try:
        async with holder.transaction():
            await writer_locks.hold_bank_writers(holder, "merged")  # an import under way
            for lock in (writer_locks.lock_documents(writer, "merged", ["log-1"]),
                         writer_locks.lock_names(writer, "merged", ["ines"])):
                async with writer.transaction():
                    with pytest.raises(asyncio.TimeoutError):  # a retain's lock waits for the import
                        await asyncio.wait_for(lock, 1.0)
            async with writer.transaction():  # another bank's retains go on
                await asyncio.wait_for(writer_locks.lock_documents(writer, "other", ["log-1"]), 5)
                await asyncio.wait_for(writer_locks.lock_names(writer, "other", ["ines"]), 5)
    finally:
        await holder.close()
    async with writer.transaction(), services.pool.acquire() as second:  # retains share the bank
        await writer_locks.lock_documents(writer, "merged", ["log-1"])
        async with second.transaction():
            await asyncio.wait_for(writer_locks.lock_documents(second, "merged", ["log-2"]), 5)
            await asyncio.wait_for(writer_locks.lock_names(second, "merged", ["ines"]), 5)


async def test_a_restore_inserting_one_fact_per_statement_restores_every_fact_as_it_was(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10,000 facts per statement in the server; one here, so each fact, its history and its entities
    # go in a statement of their own.
    services, conn = harbour
    monkeypatch.setattr(import_documents, "FACT_BATCH", 1)
    archive = await exported(services, BANK)
    assert (await import_archive(services, archive, ImportOptions("restored")))["facts_imported"] == 4
    facts = "SELECT text, created_at, state FROM memory_units WHERE bank_id = $1 ORDER BY text"
    mentions = "SELECT canonical_name, mention_count FROM entities WHERE bank_id = $1 ORDER BY canonical_name"
    for query in (facts, mentions):
        original = [tuple(r) for r in await conn.fetch(query, BANK)]
        assert original, query
        assert [tuple(r) for r in await conn.fetch(query, "restored")] == original


async def test_documents_written_a_few_per_statement_arrive_as_they_were_and_replace_whole(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,000 documents per statement in the server; three here, so the four documents take two batches.
    services, conn = harbour
    monkeypatch.setattr(import_documents, "DOCUMENT_BATCH", 3)
    archive = await exported(services, BANK)
    assert (await import_archive(services, archive, ImportOptions("restored")))["documents_imported"] == 4
    documents = ("SELECT id, created_at, tags, content_hash, original_text, metadata::text FROM documents"
                 " WHERE bank_id = $1 ORDER BY id")
    chunks = "SELECT document_id, chunk_index, chunk_text FROM chunks WHERE bank_id = $1 ORDER BY 1, 2"
    for query in (documents, chunks):
        original = [tuple(r) for r in await conn.fetch(query, BANK)]
        assert len(original) == 4, query
        assert [tuple(r) for r in await conn.fetch(query, "restored")] == original

    merged = await import_archive(services, archive, ImportOptions("restored", mode="merge",
                                                                   document_conflict="replace"))
    assert (merged["documents_replaced"], merged["facts_imported"]) == (4, 4), merged
    facts = "SELECT document_id, text FROM memory_units WHERE bank_id = $1 ORDER BY 1, 2"
    assert [tuple(r) for r in await conn.fetch(facts, "restored")] == [
        tuple(r) for r in await conn.fetch(facts, BANK)], "each replaced document's facts once"


async def test_a_restore_links_the_facts_at_each_links_places_and_sources_its_observations_by_place(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The import maps places onto its new facts (`FactPlaces`: each document's run of fact ids), a batch
    # of links at a time (two links here), also for a document of three facts.
    services, conn = harbour
    await asyncio.to_thread(retain_log_of_three_facts, services.settings.database_url)
    first, second, _ = await conn.fetch(
        "SELECT id FROM memory_units WHERE bank_id = $1 AND document_id = 'log-3' ORDER BY text", BANK)
    observation = await conn.fetchval("SELECT id FROM memory_units WHERE bank_id = $1 AND document_id = 'log-0'", BANK)
    await conn.execute(  # log-0's fact made an observation of two facts of log-3, quoting one
        """UPDATE memory_units SET fact_type = 'observation', source_memory_ids = $2,
               evidence = jsonb_build_array(jsonb_build_object('fact_id', $3::text, 'quote', 'painted'))
           WHERE id = $1""", observation, [first["id"], second["id"]], str(second["id"]))
    monkeypatch.setattr(importer, "LINK_BATCH", 2)
    archive = await exported(services, BANK)
    assert max(len(document["facts"]) for document in archive.documents) == 3
    steps = Steps()
    assert (await import_archive(services, archive, ImportOptions("restored"), steps))["observations_dropped"] == 0
    original = [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, BANK)]
    assert len(original) > 10
    # the manifest counts the archive's links (those between facts), and each batch is a step
    links = archive.manifest["link_count"]
    assert links == len(list(archive.links or [])) and links > 10
    documents, batches = len(archive.documents), math.ceil(links / 2)
    total = documents + batches + 2  # and one batch of observations, and the rest
    assert steps == [("importing", done, total) for done in [0, documents, *range(documents + 1, total + 1)]]
    for older in (None, "many"):  # an archive from before `link_count`, or with no count there: its lines counted
        archive.manifest["link_count"] = older
        again = Steps()
        await import_archive(services, archive, ImportOptions(f"restored-{older}"), again)
        assert again == steps
    assert [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, "restored")] == original
    expected = [tuple(r) for r in await conn.fetch(OBSERVATION_SOURCES, BANK)]
    assert len(expected) == 1 and expected[0][2] is not None
    assert [tuple(r) for r in await conn.fetch(OBSERVATION_SOURCES, "restored")] == expected


async def test_observations_exported_a_few_at_a_time_keep_their_sources_evidence_and_history(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each batch of observations reads the places of the facts it names (their documents' facts
    # numbered), its history, and is written before the next: one observation a batch here.
    services, conn = harbour
    first, second, third, lone = await three_facts_and_a_lone_one(services, conn)
    made = {"log-0": ([first, second], second), "log-1": ([lone, third], third)}
    for document_id, (sources, quoted) in made.items():
        await conn.execute(
            """UPDATE memory_units SET fact_type = 'observation', source_memory_ids = $3,
                   evidence = jsonb_build_array(jsonb_build_object('fact_id', $4::text, 'quote', 'a quote'))
               WHERE bank_id = $1 AND document_id = $2""", BANK, document_id, sources, str(quoted))
    await conn.execute(  # log-1's observation had an earlier version, sourced by log-3's first fact
        """INSERT INTO observation_history (observation_id, bank_id, text, source_memory_ids, evidence, reason)
           SELECT id, bank_id, 'an earlier version', $2, '[]', 'updated' FROM memory_units
           WHERE bank_id = $1 AND document_id = 'log-1'""", BANK, [first])
    monkeypatch.setattr(export, "OBSERVATION_BATCH", 1)
    archive = await exported(services, BANK)

    assert archive.manifest["observation_count"] == 2
    log3 = [fact["text"] for document in archive.documents if document["id"] == "log-3" for fact in document["facts"]]
    text = {row["id"]: row["text"] for row in await conn.fetch(
        "SELECT id, text FROM memory_units WHERE id = ANY($1::uuid[])", [first, second, third, lone])}
    place = {fact: ("log-3", log3.index(text[fact])) for fact in (first, second, third)} | {lone: ("log-2", 0)}
    by_place = [sorted((s["document_id"], s["fact_index"]) for s in o["sources"]) for o in archive.observations]
    assert sorted(by_place) == sorted(sorted(place[f] for f in sources) for sources, _ in made.values())
    assert sorted((e["document_id"], e["fact_index"]) for o in archive.observations for e in o["evidence"]) == \
        sorted(place[quoted] for _, quoted in made.values())
    histories = [o["history"] for o in archive.observations if o["history"]]
    assert [[(s["document_id"], s["fact_index"]) for s in h[0]["sources"]] for h in histories] == [[place[first]]]

    # imported a batch of observations at a time too (one here), each read from the archive only when
    # the one before is in, and a step of the progress
    monkeypatch.setattr(importer, "OBSERVATION_BATCH", 1)
    read, read_at_insert = [], []
    archived = archive.observations.batches

    def reading(size: int) -> Iterator[list[dict[str, Any]]]:
        for batch in archived(size):
            read.extend(batch)
            yield batch

    async def inserting(conn: Any, bank_id: str, rows: list[Any]) -> None:
        read_at_insert.append(len(read))
        await insert_observations(conn, bank_id, rows)

    insert_observations = transfer_writes.insert_observations
    monkeypatch.setattr(archive.observations, "batches", reading)
    monkeypatch.setattr(transfer_writes, "insert_observations", inserting)
    steps = Steps()
    result = await import_archive(services, archive, ImportOptions("restored"), steps)
    assert (result["observations_imported"], result["observations_dropped"]) == (2, 0)
    assert read_at_insert == [1, 2], "never all the archive's observations read at once"
    documents = len(archive.documents)
    assert steps == [("importing", done, documents + 4)  # the links' one batch, then each observation
                     for done in [0, documents, documents + 1, documents + 2, documents + 3, documents + 4]]
    expected = [tuple(r) for r in await conn.fetch(OBSERVATION_SOURCES, BANK)]
    assert len(expected) == 2
    assert [tuple(r) for r in await conn.fetch(OBSERVATION_SOURCES, "restored")] == expected
    history = "SELECT text, reason FROM observation_history WHERE bank_id = $1"
    assert [tuple(r) for r in await conn.fetch(history, "restored")] == [("an earlier version", "updated")]
    distances = await conn.fetch(  # each re-embedded from its text, near the vector of the fact it was made from
        """SELECT r.embedding <=> o.embedding AS distance FROM memory_units r JOIN memory_units o
               ON o.bank_id = $1 AND o.fact_type = 'observation' AND o.text = r.text
           WHERE r.bank_id = 'restored' AND r.fact_type = 'observation'""", BANK)
    assert len(distances) == 2 and all(row["distance"] < 0.05 for row in distances), distances


def _with_document_broken(data: bytes, name: str) -> bytes:
    """The archive with one document's file replaced by a JSON object with no id."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename, b"{}" if info.filename == name else source.read(info.filename))
    return out.getvalue()


async def test_an_import_reads_its_documents_a_batch_at_a_time_and_lands_whole_or_not_at_all(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,000 documents a batch in the server; three here: the progress moves once a batch, and a broken
    # fourth document, met only when its batch is read, rolls back the three already written.
    services, conn = harbour
    monkeypatch.setattr(import_documents, "DOCUMENT_BATCH", 3)
    data = await exported_bytes(services, BANK)
    steps = Steps()
    await import_archive(services, read_archive(data), ImportOptions("restored"), steps)
    assert steps == [("importing", done, 6) for done in (0, 3, 4, 5, 6)]  # 3 documents, 1, the links, the rest

    broken = _with_document_broken(data, "documents/000003.json")
    with pytest.raises(InvalidInput, match="documents/000003.json in the archive has no document id"):
        read_archive(broken)  # an upload is checked whole
    with pytest.raises(InvalidInput, match="documents/000003.json"):
        await import_archive(services, read_archive(broken, check_documents=False), ImportOptions("broken"))
    assert await conn.fetchval("SELECT count(*) FROM banks WHERE bank_id = 'broken'") == 0
    assert await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = 'broken'") == 0


async def test_links_rebuilt_a_fact_per_statement_are_the_links_rebuilt_at_once(
    harbour: tuple[Services, asyncpg.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An archive without links.json (Hindsight's) has its temporal and semantic links rebuilt, 10,000
    # facts per statement in the server; here all at once, then one fact per statement.
    services, conn = harbour
    archive = await exported(services, BANK)
    archive.links = None
    await import_archive(services, archive, ImportOptions("at-once"))
    monkeypatch.setattr(importer, "LINK_REBUILD_BATCH", 1)
    steps = Steps()
    await import_archive(services, archive, ImportOptions("one-by-one"), steps)
    facts = archive.manifest["fact_count"]  # a step a batch of facts whose links are rebuilt
    documents = len(archive.documents)
    assert steps == [("importing", done, documents + facts + 1)
                     for done in [0, documents, *range(documents + 1, documents + facts + 2)]]
    at_once = [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, "at-once")]
    assert {link_type for *_, link_type, _ in at_once} == {"temporal", "semantic"}, at_once
    assert len(at_once) > 8
    assert [tuple(r) for r in await conn.fetch(LINKS_BY_TEXT, "one-by-one")] == at_once
