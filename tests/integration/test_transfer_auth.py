"""Moving banks with a bank-limited API key: it downloads its own banks' archives and sees other
banks' as missing; it cannot clone or import into a bank it may not use."""

from __future__ import annotations

from tests.conftest import RunningServer
from tests.integration.test_auth import ADMIN, AGENT, RUN, call, retain, secured  # noqa: F401 (fixture)
from tests.support.waiting import wait_for


def _export(server: RunningServer, key: str, bank: str) -> str:
    answer = call(server, "POST", f"/v1/default/banks/{bank}/transfer/export", key)
    assert answer.status_code == 202, answer.text
    operation = answer.json()["operation_id"]
    status = wait_for(lambda: (s := call(server, "GET", f"/v1/default/banks/{bank}/operations/{operation}", key).json())
                      ["status"] in ("completed", "failed") and s, "the export")
    assert status["status"] == "completed", status
    return status["result_metadata"]["download_url"]


def test_a_bank_limited_key_moves_only_its_banks(secured: RunningServer) -> None:  # noqa: F811
    mine, theirs = f"team-{RUN}-move", f"other-{RUN}-move"
    for key, bank in ((AGENT, mine), (ADMIN, theirs)):
        assert retain(secured, key, bank, f"Facts of {bank}.").status_code == 200
    own = _export(secured, AGENT, mine)
    assert call(secured, "GET", own, AGENT).content[:2] == b"PK"
    other = _export(secured, ADMIN, theirs)
    assert call(secured, "GET", other, AGENT).status_code == 404, "another bank's archive is missing to it"
    assert call(secured, "GET", other, ADMIN).status_code == 200

    refused = call(secured, "POST", f"/v1/default/banks/{mine}/clone", AGENT, params={"target_bank_id": theirs + "x"})
    assert refused.status_code == 403 and theirs + "x" in refused.json()["detail"]
    allowed = call(secured, "POST", f"/v1/default/banks/{mine}/clone", AGENT, params={"target_bank_id": mine + "-2"})
    assert allowed.status_code == 202
    archive = call(secured, "GET", own, AGENT).content
    imported = call(secured, "POST", f"/v1/default/banks/{mine}/transfer/import", AGENT,
                    params={"target_bank_id": theirs + "y"}, files={"file": ("a.zip", archive)})
    assert imported.status_code == 403
