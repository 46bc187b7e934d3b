"""Retains appending to one document at once, as an agent's turns of one conversation may arrive. Each
plans its chunks against the document as it found it; the one that writes second finds the document
changed, and answered 409. Retains of one document in one server now take turns
(`retain.document_turns`), so each plans against the version the previous one wrote; a retain that
still finds its document changed (another server wrote it) is planned again (`retain.replanned`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import RunningServer

SPEAKERS = ["Ana", "Bruno", "Carla", "Dario", "Elena", "Farid"]
TURNS = 5


def append_turns(url: str, bank_id: str, speaker: str) -> list[int]:
    with httpx.Client(base_url=f"{url}/v1/default/banks/{bank_id}", timeout=60) as client:
        return [client.post("/memories", json={"items": [{
            "content": f"{speaker} said turn {n} of the harbour story.", "document_id": "conversation",
            "update_mode": "append"}]}).status_code for n in range(TURNS)]


def test_sync_retains_appending_to_one_document_at_once_all_land(
    server: RunningServer, http: httpx.Client, bank_id: str
) -> None:
    with ThreadPoolExecutor(len(SPEAKERS)) as threads:
        answers = [status for run in [threads.submit(append_turns, server.url, bank_id, s) for s in SPEAKERS]
                   for status in run.result()]
    assert answers == [200] * len(SPEAKERS) * TURNS
    assert f"bank {bank_id!r}" not in server.log(), "no retain was planned twice"
    document = http.get(f"/v1/default/banks/{bank_id}/documents/conversation").json()
    turns = sorted(line for line in document["original_text"].splitlines() if line.strip())
    assert turns == sorted(f"{s} said turn {n} of the harbour story." for s in SPEAKERS for n in range(TURNS))
