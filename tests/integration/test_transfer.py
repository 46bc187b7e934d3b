"""Moving banks through the real server: the archive a real Hindsight 1.1.0 server exported imports
with every record (counts and contents read from the archive itself); an Engram bank exported and
imported again — or cloned — loses nothing; bad archives and taken bank ids are refused."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer
from tests.integration.test_attachments import PDF, block, png
from tests.integration.test_consolidation import Script, fact_line, observation_handle
from tests.support.scripted_llm import ScriptedLLM
from tests.support.waiting import finish_operation, settle

HINDSIGHT_ARCHIVE = Path(__file__).resolve().parents[2] / "../shared/data/hindsight-1.1.0-export.zip"


def import_archive(http: httpx.Client, bank_id: str, data: bytes, **params: Any) -> dict[str, Any]:
    answer = http.post(f"/v1/default/banks/{bank_id}/transfer/import", params=params,
                       files={"file": ("bank.zip", data, "application/zip")})
    assert answer.status_code == 202, answer.text
    status = finish_operation(http, bank_id, answer.json()["operation_id"])
    assert status["status"] == "completed", status
    return status["result_metadata"]


def export_archive(http: httpx.Client, bank_id: str, **params: Any) -> bytes:
    answer = http.post(f"/v1/default/banks/{bank_id}/transfer/export", params=params)
    assert answer.status_code == 202, answer.text
    status = finish_operation(http, bank_id, answer.json()["operation_id"])
    assert status["status"] == "completed", status
    download = http.get(status["result_metadata"]["download_url"])
    assert download.status_code == 200 and download.headers["content-type"] == "application/zip"
    return download.content


def _archive_json(name: str) -> Any:
    with zipfile.ZipFile(HINDSIGHT_ARCHIVE) as zf:
        return json.loads(zf.read(name))


def _archive_documents() -> list[dict[str, Any]]:
    with zipfile.ZipFile(HINDSIGHT_ARCHIVE) as zf:
        return [json.loads(zf.read(n)) for n in sorted(zf.namelist()) if n.startswith("documents/")]


def _all(http: httpx.Client, bank_id: str, path: str, key: str = "items", **params: Any) -> list[dict[str, Any]]:
    return http.get(f"/v1/default/banks/{bank_id}/{path}", params={"limit": 1000, **params}).json()[key]


@pytest.mark.skipif(not HINDSIGHT_ARCHIVE.exists(), reason="the Hindsight archive is in ../shared/data")
def test_real_hindsight_archive_imports_every_record(http: httpx.Client, bank_id: str) -> None:
    manifest = _archive_json("manifest.json")
    documents = _archive_documents()
    archived_observations = _archive_json("observations.json")
    result = import_archive(http, "ops", HINDSIGHT_ARCHIVE.read_bytes(), target_bank_id=bank_id)
    assert result["documents_imported"] == manifest["document_count"] == len(documents)
    assert result["facts_imported"] == manifest["fact_count"]
    assert result["observations_imported"] == manifest["observation_count"] and result["observations_dropped"] == 0

    stored = {d["id"]: d for d in _all(http, bank_id, "documents")}
    assert set(stored) == {d["id"] for d in documents}
    facts = _all(http, bank_id, "memories/list", type="world")
    assert len(facts) == manifest["fact_count"]
    by_text = {f["text"]: f for f in facts}
    for doc in documents:
        detail = http.get(f"/v1/default/banks/{bank_id}/documents/{doc['id']}").json()
        assert detail["original_text"] == doc["original_text"] and detail["tags"] == doc["tags"]
        assert detail["retain_params"] == doc["retain_params"]
        chunks = _all(http, bank_id, f"documents/{doc['id']}/chunks")
        assert [c["chunk_text"] for c in chunks] == [c["chunk_text"] for c in doc["chunks"]]
        for fact in doc["facts"]:
            mine = by_text[fact["text"]]
            assert mine["document_id"] == doc["id"] and mine["tags"] == fact["tags"]
            assert mine["mentioned_at"][:19] == fact["mentioned_at"][:19] and mine["context"] == (fact["context"] or "")
            assert sorted(e for e in mine["entities"].split(", ") if e) == sorted(fact["entities"])
            assert mine["consolidated_at"], "a fact consolidated in Hindsight is not consolidated again"
            assert mine["chunk_id"] == chunks[fact["chunk_index"]]["chunk_id"]

    observations = _all(http, bank_id, "memories/list", type="observation")
    assert sorted(o["text"] for o in observations) == sorted(o["text"] for o in archived_observations)
    assert {uuid.UUID(u["id"]).version for u in facts + observations} == {7}, "imported units get time-ordered ids"
    fact_ids = {(doc["id"], i): by_text[f["text"]]["id"] for doc in documents for i, f in enumerate(doc["facts"])}
    for archived in archived_observations:
        mine = next(o for o in observations if o["text"] == archived["text"])
        assert mine["tags"] == archived["tags"] and mine["proof_count"] == archived["proof_count"]
        expected = [fact_ids[(s["document_id"], s["fact_index"])] for s in archived["sources"]]
        assert mine["source_memory_ids"] == expected

    entities = {e["canonical_name"] for e in _all(http, bank_id, "entities")}
    assert entities == {name for doc in documents for f in doc["facts"] for name in f["entities"]}
    links = http.get(f"/v1/default/banks/{bank_id}/stats").json()["links_by_link_type"]
    assert links.get("temporal", 0) > 0, "temporal links are rebuilt"

    (model,) = _archive_json("mental_models.json")
    mine = http.get(f"/v1/default/banks/{bank_id}/mental-models/{model['id']}").json()
    assert (mine["name"], mine["source_query"]) == (model["name"], model["source_query"])
    history = http.get(f"/v1/default/banks/{bank_id}/mental-models/{model['id']}/history").json()["history"]
    archived_history = _archive_json("mental_model_history.json")
    assert sorted(h["content"] for h in history) == sorted(h["content"] for h in archived_history)
    assert len(history) == len(archived_history)
    (directive,) = _archive_json("directives.json")
    (mine,) = _all(http, bank_id, "directives")
    assert (mine["name"], mine["content"], mine["priority"]) == (directive["name"], directive["content"], 1)

    bank_row = _archive_json("banks.json")[0]
    overrides = http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"]
    for key, value in json.loads(bank_row["config"]).items():
        assert overrides[key] == value, key
    banks = http.get("/v1/default/banks", params={"q": bank_id, "limit": 1000}).json()["banks"]
    (listed,) = [b for b in banks if b["bank_id"] == bank_id]
    assert listed["name"] == bank_row["name"]
    recalled = http.post(f"/v1/default/banks/{bank_id}/memories/recall", json={"query": "Who fixed checkout?"}).json()
    assert recalled["results"], "imported facts are embedded and searchable"


# --- Engram → archive → Engram ----------------------------------------------------------------------


def snapshot(http: httpx.Client, bank_id: str) -> dict[str, Any]:
    """Everything a bank holds, as the API shows it, without ids that an import renews."""
    facts = _all(http, bank_id, "memories/list")
    text_of = {f["id"]: f["text"] for f in facts}
    units = []
    for fact in sorted(facts, key=lambda f: (f["fact_type"], f["text"])):
        detail = http.get(f"/v1/default/banks/{bank_id}/memories/{fact['id']}").json()
        entry = {k: detail[k] for k in ("text", "fact_type", "tags", "metadata", "context", "mentioned_at",
                                       "occurred_start", "occurred_end", "document_id", "state",
                                       "invalidation_reason", "proof_count", "observation_scopes", "fact_kind",
                                       "created_at")}
        entry["entities"] = sorted(detail["entities"])
        entry["consolidated"] = bool(detail["consolidated_at"])
        entry["edited"] = bool(detail["edited_at"])
        entry["sources"] = sorted(text_of[s] for s in detail["source_memory_ids"])
        entry["evidence"] = sorted(e["quote"] for e in detail["evidence"] or [])
        if fact["fact_type"] == "observation":
            history = http.get(f"/v1/default/banks/{bank_id}/memories/{fact['id']}/history").json()["history"]
            entry["history"] = [h["text"] for h in history]
        units.append(entry)
    documents = []
    for doc in sorted(_all(http, bank_id, "documents"), key=lambda d: d["id"]):
        detail = http.get(f"/v1/default/banks/{bank_id}/documents/{doc['id']}").json()
        chunks = _all(http, bank_id, f"documents/{doc['id']}/chunks")
        documents.append({k: detail[k] for k in ("id", "original_text", "tags", "document_metadata", "retain_params",
                                                  "observation_scopes", "memory_unit_count", "created_at")}
                         | {"chunks": [(c["chunk_text"], [a["hash"] for a in c["attachments"]]) for c in chunks],
                            "attachments": [(a["kind"], a["media_type"], a["hash"], a["byte_size"], a["filename"],
                                             hashlib.sha256(http.get(a["url"]).content).hexdigest())
                                            for a in detail["attachments"]]})
    stats = http.get(f"/v1/default/banks/{bank_id}/stats").json()
    models = [{k: m[k] for k in ("id", "name", "source_query", "tags", "max_tokens", "trigger")}
              for m in _all(http, bank_id, "mental-models")]
    directives = [{k: d[k] for k in ("name", "content", "priority", "is_active", "tags")}
                  for d in _all(http, bank_id, "directives")]
    config = http.get(f"/v1/default/banks/{bank_id}/config").json()["overrides"]
    entities = sorted((e["canonical_name"], e["mention_count"]) for e in _all(http, bank_id, "entities"))
    return {"units": units, "documents": documents, "links": stats["links_by_link_type"], "models": models,
            "directives": directives, "config": config, "entities": entities}


@pytest.fixture
def llm_http(llm_server: RunningServer) -> httpx.Client:
    with llm_server.client() as client:
        yield client


def _rich_bank(http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    """Documents with tags, metadata and dates; observations with a history; an edited and an
    invalidated fact; a mental model, a directive and config overrides."""
    script = Script(llm)

    def decide(request):
        for line in request.user_text.splitlines():
            if line.startswith("F") and ": " in line:
                handle, text = line.split(" ", 1)[0], line.split(": ", 1)[1]
                if (target := observation_handle(request, "Berlin")) and "Berlin" in text:
                    return {"updates": [{"observation": target, "text": "Alice has lived in Berlin for years",
                                         "evidence": [{"fact": handle, "quote": "Berlin"}], "reason": "more"}]}
                return {"creates": [{"text": "Seen: " + text, "evidence": [{"fact": handle, "quote": text[:12]}]}]}
        return {}

    script.decide = decide
    http.put(f"/v1/default/banks/{bank_id}", json={"name": "Rich", "mission": "Remember the team"}).raise_for_status()
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"retain_chunk_size": 1200,
                                                                         "disposition_empathy": 5}}).raise_for_status()
    items = [
        {"content": "Alice moved to Berlin in 2019.", "document_id": "a", "tags": ["team:x"],
         "metadata": {"source": "hr"}, "timestamp": "2024-02-01T10:00:00Z", "context": "profile"},
        {"content": "Alice still lives in Berlin.", "document_id": "b", "tags": ["team:x"],
         "timestamp": "2024-03-01T10:00:00Z"},
        {"content": "Bob plays the cello on Sundays.", "document_id": "c", "tags": ["team:y"],
         "observation_scopes": "per_tag"},
        {"content": [{"type": "text", "text": "The team photo from the offsite."}, block("image", "image/png", png()),
                     block("file", "application/pdf", PDF, filename="agenda.pdf")], "document_id": "d"},
    ]
    for item in items:
        http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [item]}).raise_for_status()
        settle(http, bank_id)
    facts = {f["text"]: f for f in _all(http, bank_id, "memories/list", type="world")}
    cello = next(f for text, f in facts.items() if "cello" in text)
    http.patch(f"/v1/default/banks/{bank_id}/memories/{cello['id']}",
               json={"state": "invalidated", "reason": "Bob sold it"}).raise_for_status()
    http.post(f"/v1/default/banks/{bank_id}/directives", json={"name": "short", "content": "Be short.",
                                                                "priority": 2, "tags": ["t"]}).raise_for_status()
    http.post(f"/v1/default/banks/{bank_id}/mental-models", json={
        "id": "team", "name": "Team", "source_query": "Who is on the team?", "tags": ["team:x"]}).raise_for_status()
    settle(http, bank_id)
    assert fact_line  # imported helper kept for symmetry with the consolidation tests


def test_engram_export_reimports_with_nothing_lost(llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    _rich_bank(llm_http, llm, bank_id)
    before = snapshot(llm_http, bank_id)
    assert any(u["fact_type"] == "observation" and u["history"] for u in before["units"]), "the bank has history"
    data = export_archive(llm_http, bank_id)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["schema_version"] == 1 and manifest["archive_type"] == "bank"
        assert manifest["document_count"] == 4 and "documents/000003.json" in zf.namelist()
        assert manifest["attachment_count"] == 2
        assert len([n for n in zf.namelist() if n.startswith("attachments/")]) == 2
    copy = bank_id + "-copy"
    result = import_archive(llm_http, bank_id, data, target_bank_id=copy)
    assert result["observations_dropped"] == 0 and result["config_keys_dropped"] == []
    settle(llm_http, copy)
    assert snapshot(llm_http, copy) == before

    again = import_archive(llm_http, bank_id, data, target_bank_id=copy, mode="merge", document_conflict="skip")
    assert again["documents_skipped"] == 4 and again["facts_imported"] == 0
    renamed = import_archive(llm_http, bank_id, data, target_bank_id=copy, mode="merge", document_conflict="new-id")
    assert renamed["documents_imported"] == 4
    assert len(_all(llm_http, copy, "documents")) == 8


def test_clone_copies_the_bank(llm_http: httpx.Client, llm: ScriptedLLM, bank_id: str) -> None:
    _rich_bank(llm_http, llm, bank_id)
    before = snapshot(llm_http, bank_id)
    answer = llm_http.post(f"/v1/default/banks/{bank_id}/clone", params={"target_bank_id": bank_id + "-clone"})
    assert answer.status_code == 202, answer.text
    assert finish_operation(llm_http, bank_id, answer.json()["operation_id"])["status"] == "completed"
    settle(llm_http, bank_id + "-clone")
    assert snapshot(llm_http, bank_id + "-clone") == before
    taken = llm_http.post(f"/v1/default/banks/{bank_id}/clone", params={"target_bank_id": bank_id + "-clone"})
    assert taken.status_code == 409


def test_bad_archives_taken_banks_and_deprecated_routes(http: httpx.Client, bank_id: str) -> None:
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Zoe likes tea.",
                                                                         "document_id": "z"}]}).raise_for_status()
    bad = http.post(f"/v1/default/banks/{bank_id}/transfer/import", files={"file": ("x.zip", b"not a zip")})
    assert bad.status_code == 400 and bad.json()["field"] == "file"
    no_manifest = io.BytesIO()
    with zipfile.ZipFile(no_manifest, "w") as zf:
        zf.writestr("documents/000000.json", "{}")
    bad = http.post(f"/v1/default/banks/{bank_id}/transfer/import", files={"file": ("x.zip", no_manifest.getvalue())})
    assert bad.status_code == 400 and "manifest" in bad.json()["detail"]
    data = export_archive(http, bank_id)
    # an observation the import could not read: refused at the upload, naming it, not failed later
    broken = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(broken, "w") as zf:
        for name in source.namelist():
            text = source.read(name)
            if name == "observations.json":
                text = b'[\n{"text": "Zoe drinks tea.", "sources": []},\n{"sources": []}\n]\n'
            zf.writestr(name, text)
    bad = http.post(f"/v1/default/banks/{bank_id}/transfer/import", params={"target_bank_id": f"{bank_id}-b"},
                    files={"file": ("x.zip", broken.getvalue())})
    assert bad.status_code == 400 and bad.json()["field"] == "file"
    assert bad.json()["detail"] == "file: observation 2 in observations.json has no text"
    assert f"{bank_id}-b" not in [b["bank_id"] for b in http.get("/v1/default/banks").json()["banks"]]
    taken = http.post(f"/v1/default/banks/{bank_id}/transfer/import", params={"target_bank_id": bank_id},
                      files={"file": ("x.zip", data)})
    assert taken.status_code == 409
    assert http.get(f"/v1/default/banks/{bank_id}/document-transfer").status_code == 410
    assert http.get("/v1/default/files/download/banks/nope/exports/x/transfer.zip").status_code == 404
    assert http.post(f"/v1/default/banks/{bank_id}/clone", params={"target_bank_id": ""}).status_code == 400
    assert http.post("/v1/default/banks/missing-bank/transfer/export").status_code == 404

    answer = http.post(f"/v1/default/banks/{bank_id}/document-transfer/export", params={"document_id": ["z"]})
    assert answer.status_code == 202
    status = finish_operation(http, bank_id, answer.json()["operation_id"])
    archive = http.get(status["result_metadata"]["download_url"]).content
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert json.loads(zf.read("manifest.json"))["archive_type"] == "documents"
    merged = http.post(f"/v1/default/banks/{bank_id}/document-transfer", params={"on_conflict": "replace"},
                       files={"file": ("d.zip", archive)})
    assert merged.status_code == 202
    result = finish_operation(http, bank_id, merged.json()["operation_id"])["result_metadata"]
    assert result["documents_replaced"] == 1 and result["facts_imported"] == 1
    assert [f["text"] for f in _all(http, bank_id, "memories/list")] == ["Zoe likes tea."]


def test_old_export_archives_are_dropped_by_the_next_export(http: httpx.Client, bank_id: str, pg_dsn: str) -> None:
    from tests.conftest import _admin

    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [{"content": "Yuki bakes bread."}]})
    first = http.post(f"/v1/default/banks/{bank_id}/transfer/export").json()["operation_id"]
    url = finish_operation(http, bank_id, first)["result_metadata"]["download_url"]
    key = url.split("/files/download/", 1)[1]
    _admin(pg_dsn, f"UPDATE stored_files SET created_at = now() - interval '2 days' WHERE key = '{key}'")
    assert http.get(url).status_code == 200, "kept until a later export"
    second = http.post(f"/v1/default/banks/{bank_id}/transfer/export").json()["operation_id"]
    newer = finish_operation(http, bank_id, second)["result_metadata"]["download_url"]
    assert http.get(url).status_code == 404 and http.get(newer).status_code == 200


def _without_engram_keys(data: bytes) -> bytes:
    """The archive as Hindsight 1.1.0 would write it: documents without Engram's own keys."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            body = src.read(name)
            if name.startswith("documents/"):
                doc = json.loads(body)
                doc.pop("metadata"), doc.pop("engram_retain_params", None)
                body = json.dumps(doc).encode()
            dst.writestr(name, body)
    return out.getvalue()


def test_document_metadata_travels_where_hindsight_keeps_it(http: httpx.Client, bank_id: str) -> None:
    """Hindsight 1.1.0 reads a document's metadata from `retain_params.metadata` only (checked
    against the real server: an Engram archive imported there kept it only once it was there)."""
    http.post(f"/v1/default/banks/{bank_id}/memories", json={"items": [
        {"content": "Carol Diaz teaches piano in Lisbon.", "document_id": "carol", "metadata": {"source": "chat"},
         "context": "profile"}]}).raise_for_status()
    stored = http.get(f"/v1/default/banks/{bank_id}/documents/carol").json()
    data = export_archive(http, bank_id)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        doc = json.loads(zf.read("documents/000000.json"))
    assert doc["retain_params"]["metadata"] == {"source": "chat"}
    assert doc["engram_retain_params"] == stored["retain_params"]

    import_archive(http, bank_id, _without_engram_keys(data), target_bank_id=bank_id + "-hs")
    copy = http.get(f"/v1/default/banks/{bank_id}-hs/documents/carol").json()
    assert copy["document_metadata"] == {"source": "chat"}
    import_archive(http, bank_id, data, target_bank_id=bank_id + "-engram")
    again = http.get(f"/v1/default/banks/{bank_id}-engram/documents/carol").json()
    assert again["document_metadata"] == {"source": "chat"} and again["retain_params"] == stored["retain_params"]
