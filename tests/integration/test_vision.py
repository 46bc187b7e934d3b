"""Image blocks and an LLM that reads images (ENGRAM_LLM_VISION=true): each chunk's images go into its
extraction call as image parts, byte for byte, and only that chunk's; with vision off they do not,
and the image is kept either way."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RunningServer, start_server
from tests.integration.test_attachments import block, png
from tests.support.scripted_llm import ScriptedLLM


def image_urls(request) -> list[str]:
    user = [m for m in request.messages if m.get("role") == "user"][-1]
    parts = user["content"] if isinstance(user["content"], list) else []
    return [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]


def answer(request):
    if request.schema_name != "ExtractionOutput":
        return {"creates": [], "updates": [], "deletes": []}
    text = request.user_text.split("Text:\n", 1)[1].split("\n\nImages shown", 1)[0].strip()
    facts = [{"what": text, "fact_type": "world", "entities": []}]
    if image_urls(request):
        facts.append({"what": "The picture shows a red square", "fact_type": "world", "entities": []})
    return {"facts": facts}


@pytest.fixture
def vision_server(isolated_dsn: str, scripted_llm: ScriptedLLM) -> Iterator[RunningServer]:
    env = {**scripted_llm.settings_env(), "ENGRAM_LLM_VISION": "true", "ENGRAM_LLM_MAX_RETRIES": "0"}
    running = start_server(isolated_dsn, env, name="vision")
    yield running
    running.stop()


FIRST, SECOND = "First take the cover off the box, gently.", "Then do the wiring of all the red cables."
JPEG = b"\xff\xd8\xff fake jpeg"
CONTENT = [{"type": "text", "text": FIRST}, block("image", "image/png", png(2, 2)),
           {"type": "text", "text": SECOND}, block("image", "image/jpeg", JPEG)]


def _retain(http: httpx.Client, bank_id: str) -> None:
    http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"retain_chunk_size": 50,
                                                                         "enable_observations": False}})
    answer_ = http.post(f"/v1/default/banks/{bank_id}/memories",
                        json={"items": [{"content": CONTENT, "document_id": "d"}]})
    assert answer_.status_code == 200, answer_.text


def test_each_chunk_sends_its_own_images(vision_server: RunningServer, llm: ScriptedLLM, bank_id: str) -> None:
    llm.handler = answer
    with vision_server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
        _retain(http, bank_id)
        texts = [f["text"] for f in http.get(f"/v1/default/banks/{bank_id}/memories/list").json()["items"]]
        attachments = http.get(f"/v1/default/banks/{bank_id}/documents/d").json()["attachments"]
    calls = {r.user_text.split("Text:\n", 1)[1].split("\n\n")[0]: image_urls(r)
             for r in llm.requests if r.schema_name == "ExtractionOutput"}
    assert calls == {
        FIRST: ["data:image/png;base64," + base64.b64encode(png(2, 2)).decode()],
        SECOND: ["data:image/jpeg;base64," + base64.b64encode(JPEG).decode()],
    }
    assert texts.count("The picture shows a red square") == 2
    assert len(attachments) == 2, "the images are kept as well"


def test_without_vision_the_images_stay_out_of_the_prompt(
    llm_server: RunningServer, llm: ScriptedLLM, bank_id: str
) -> None:
    llm.handler = answer
    with llm_server.client() as http:
        http.put(f"/v1/default/banks/{bank_id}", json={}).raise_for_status()
        _retain(http, bank_id)
        attachments = http.get(f"/v1/default/banks/{bank_id}/documents/d").json()["attachments"]
    extraction = [r for r in llm.requests if r.schema_name == "ExtractionOutput"]
    assert len(extraction) == 2 and all(image_urls(r) == [] for r in extraction)
    assert len(attachments) == 2
