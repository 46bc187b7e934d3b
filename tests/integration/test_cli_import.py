"""`engram import`, `stats`, `export` and `restore` against a live server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import RunningServer
from tests.integration.test_cli import engram, ok


def test_import_a_chat_transcript_json(server: RunningServer, bank_id: str, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([
        {"role": "user", "content": "I adopted a beagle called Pepper.", "timestamp": "2024-02-01T10:00:00Z"},
        {"role": "assistant", "content": "Congratulations on adopting Pepper!"},
    ]))
    output = ok(engram(server, "import", bank_id, str(chat), "--tag", "chat"))
    assert f"imported 1 items into {bank_id}" in output
    assert "0 failed batches" in output
    listed = ok(engram(server, "recall", bank_id, "What is the dog called?"))
    assert "Pepper" in listed.splitlines()[0]


def test_import_jsonl_items_in_batches_with_a_summary(server: RunningServer, bank_id: str, tmp_path: Path) -> None:
    lines = [json.dumps({"content": f"Station {n} recorded {n * 3} millimetres of rain.", "tags": ["weather"]})
             for n in range(45)]
    (tmp_path / "rain.jsonl").write_text("\n".join(lines))
    output = ok(engram(server, "import", bank_id, str(tmp_path / "rain.jsonl")))
    assert "imported 45 items" in output and "45 new facts" in output

    stats = ok(engram(server, "stats", bank_id))
    assert "memories" in stats and "45" in stats
    assert "consolidation is off: no LLM configured (set ENGRAM_LLM_PROVIDER)" in stats
    assert "waiting for consolidation" not in stats


def test_import_reports_unreadable_files(server: RunningServer, bank_id: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\nnot json\n')
    result = engram(server, "import", bank_id, str(bad))
    assert result.returncode != 0 and "line 2" in result.stderr


def test_export_and_restore_a_bank_template(server: RunningServer, bank_id: str, tmp_path: Path) -> None:
    ok(engram(server, "retain", bank_id, "Seed memory."))
    import httpx

    httpx.patch(f"{server.url}/v1/default/banks/{bank_id}/config",
                json={"updates": {"retain_chunk_size": 1500, "consolidation_strategies": [
                    {"scopes": [{"tags": ["team:*"]}], "observations_mission": "Decisions only."}]}}).raise_for_status()
    httpx.post(f"{server.url}/v1/default/banks/{bank_id}/directives",
               json={"name": "polite", "content": "Be polite."}).raise_for_status()
    template = tmp_path / "bank.json"
    ok(engram(server, "export", bank_id, "-o", str(template)))
    manifest = json.loads(template.read_text())
    assert manifest["bank"]["retain_chunk_size"] == 1500
    assert manifest["directives"][0]["name"] == "polite"

    copy = f"{bank_id}-copy"
    dry = json.loads(ok(engram(server, "restore", copy, str(template), "--dry-run")))
    assert dry["dry_run"] is True and dry["directives_created"] == ["polite"]
    assert httpx.get(f"{server.url}/v1/default/banks/{copy}/config").status_code == 404, "a dry run writes nothing"
    applied = json.loads(ok(engram(server, "restore", copy, str(template))))
    assert applied["config_applied"] is True
    config = httpx.get(f"{server.url}/v1/default/banks/{copy}/config").json()["overrides"]
    assert config["consolidation_strategies"] == manifest["bank"]["consolidation_strategies"], \
        "strategies survive export and import unchanged"
    again = json.loads(ok(engram(server, "restore", copy, str(template))))
    assert again["directives_updated"] == ["polite"] and again["directives_created"] == []


def test_a_template_with_an_unknown_setting_is_refused(server: RunningServer, bank_id: str) -> None:
    import httpx

    response = httpx.post(f"{server.url}/v1/default/banks/{bank_id}/import",
                          json={"version": "1", "bank": {"retain_chunk_sise": 5}})
    assert response.status_code == 400 and "retain_chunk_sise" in response.json()["detail"]
    schema = httpx.get(f"{server.url}/v1/bank-template-schema").json()
    assert schema["title"] == "BankTemplateManifest" and "version" in schema["required"]


def test_a_conversation_imports_turn_by_turn_into_one_document(
    server: RunningServer, bank_id: str, tmp_path: Path
) -> None:
    speakers = ("Maya", "Theo")
    turns = [{"speaker": speakers[n % 2], "text": f"Turn {n}: the harbour ferry number {n} leaves from pier {n % 7} "
              f"and it carries bicycles, dogs and a small cafe on the upper deck."} for n in range(80)]
    (tmp_path / "chat.json").write_text(json.dumps(turns))
    result = engram(server, "import", bank_id, str(tmp_path / "chat.json"))
    assert f"imported 1 items into {bank_id}: 80 new facts" in ok(result)
    # Not a terminal: plain progress lines, counted in turns, ending with the whole conversation.
    progress = [line for line in result.stderr.splitlines() if line.startswith("importing chat.json: ")]
    assert progress and progress[-1].startswith("importing chat.json: 80/80 turns (100 %")
    import httpx

    documents = httpx.get(f"{server.url}/v1/default/banks/{bank_id}/documents").json()
    assert [(d["id"], d["memory_unit_count"]) for d in documents["items"]] == [("chat.json", 80)]
    again = ok(engram(server, "import", bank_id, str(tmp_path / "chat.json")))
    assert "0 new facts" in again, "importing the same conversation again replaces it"
