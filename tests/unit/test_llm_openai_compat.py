"""The OpenAI-compatible provider against a real HTTP server that answers what each test scripts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from engram.errors import LLMError
from engram.llm import TokenUsage, from_settings
from engram.llm.openai_compat import OpenAICompatibleProvider
from engram.settings import Settings
from tests.support.scripted_llm import Reply, ScriptedLLM

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
ASK = [{"role": "system", "content": "You answer questions."}, {"role": "user", "content": "6 times 7?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def llm(server: ScriptedLLM) -> ScriptedLLM:
    server.reset()
    return server


def provider_for(llm: ScriptedLLM, **settings: object) -> OpenAICompatibleProvider:
    provider = from_settings(llm.settings(**{"llm_max_retries": 2, **settings}), retry_backoff=0.01)
    assert isinstance(provider, OpenAICompatibleProvider)
    return provider


@pytest.fixture
async def provider(llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleProvider]:
    provider = provider_for(llm)
    yield provider
    await provider.aclose()


async def test_schema_mode_sends_the_json_schema_and_the_api_key(llm, provider):
    llm.enqueue(Reply.json({"answer": 42}, usage=(30, 4)))

    response = await provider.complete(ASK, json_schema=SCHEMA, schema_name="Answer")

    assert json.loads(response.text) == {"answer": 42}
    assert response.usage == TokenUsage(input_tokens=30, output_tokens=4)
    assert response.usage.total_tokens == 34
    assert response.finish_reason == "stop"
    sent = llm.requests[0]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": SCHEMA, "strict": False},
    }
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent["model"] == "scripted"
    assert sent["temperature"] == 0.1
    assert sent.messages == ASK


async def test_server_without_schema_mode_gets_json_object_with_the_schema_in_the_prompt(llm, provider):
    llm.supports_json_schema = False
    llm.handler = lambda request: {"answer": 42}

    first = await provider.complete(ASK, json_schema=SCHEMA, schema_name="Answer")
    second = await provider.complete(ASK, json_schema=SCHEMA, schema_name="Answer")

    assert json.loads(first.text) == json.loads(second.text) == {"answer": 42}
    # One rejected request, then json_object; the second call goes straight to json_object.
    assert [r.response_format for r in llm.requests] == ["json_schema", "json_object", "json_object"]
    assert json.dumps(SCHEMA, separators=(",", ":")) in llm.last_system_prompt()
    assert llm.last_system_prompt().startswith("You answer questions.")


async def test_json_object_rejected_too_falls_back_to_the_schema_in_the_prompt(llm, provider):
    llm.enqueue(
        Reply.reject_json_schema(),
        Reply.error(400, json.dumps({"error": {"message": "'response_format.type' must be 'json_schema'"}})),
        Reply.json({"answer": 42}),
    )

    response = await provider.complete(ASK, json_schema=SCHEMA)

    assert json.loads(response.text) == {"answer": 42}
    assert [r.response_format for r in llm.requests] == ["json_schema", "json_object", None]
    assert "JSON schema" in llm.last_system_prompt()


async def test_model_refusing_temperature_is_asked_again_without_it(llm, provider):
    refusal = {"error": {"message": "Unsupported value: 'temperature' does not support 0.1 with this model."}}
    llm.enqueue(Reply.error(400, json.dumps(refusal)), Reply.text("hi"), Reply.text("again"))

    assert (await provider.complete(ASK)).text == "hi"
    assert (await provider.complete(ASK)).text == "again"

    assert ["temperature" in r for r in llm.requests] == [True, False, False]


async def test_server_error_is_retried_until_success(llm, provider):
    llm.enqueue(Reply.error(500, "boom"), Reply.error(429, "slow down"), Reply.text("fine"))

    response = await provider.complete(ASK)

    assert response.text == "fine"
    assert len(llm.requests) == 3


async def test_server_error_forever_raises_llm_error_naming_status_and_body(llm, provider):
    llm.handler = lambda request: Reply.error(503, json.dumps({"error": {"message": "model overloaded"}}))

    with pytest.raises(LLMError) as failure:
        await provider.complete(ASK)

    assert len(llm.requests) == 3  # the first try and llm_max_retries=2 retries
    message = failure.value.message
    assert "'openai'" in message and "HTTP 503" in message and "model overloaded" in message
    assert "3 attempts" in message


async def test_client_error_fails_at_once(llm, provider):
    llm.enqueue(Reply.error(401, json.dumps({"error": {"message": "Incorrect API key provided"}})))

    with pytest.raises(LLMError, match="HTTP 401: Incorrect API key provided"):
        await provider.complete(ASK)

    assert len(llm.requests) == 1


async def test_slow_server_times_out_with_llm_error(llm):
    llm.handler = lambda request: Reply.delay(1.0, then=Reply.text("too late"))
    provider = provider_for(llm, llm_timeout=0.2, llm_max_retries=1)

    with pytest.raises(LLMError, match=r"timed out after 0\.2s"):
        await provider.complete(ASK)

    await provider.aclose()
    assert len(llm.requests) == 2


async def test_unreachable_server_raises_llm_error():
    closed_port = "http://127.0.0.1:9/v1"
    settings = Settings(llm_provider="vllm", llm_model="m", llm_base_url=closed_port, llm_max_retries=1)
    provider = from_settings(settings, retry_backoff=0.01)

    with pytest.raises(LLMError, match=r"'vllm' .* could not be reached \(\w*Connect\w*Error"):
        await provider.complete(ASK)

    await provider.aclose()


async def test_tool_calls_are_decoded_and_can_be_sent_back(llm, provider):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "recall",
                "description": "Search memory",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            },
        }
    ]
    llm.enqueue(Reply.tool_calls([("recall", {"query": "where does Alice live"})]), Reply.text("Paris"))

    first = await provider.complete(ASK, tools=tools, tool_choice="auto")
    call = first.tool_calls[0]
    follow_up = [
        *ASK,
        first.assistant_message(),
        {"role": "tool", "tool_call_id": call.id, "content": "Alice lives in Paris"},
    ]
    second = await provider.complete(follow_up, tools=tools)

    assert (call.name, call.arguments) == ("recall", {"query": "where does Alice live"})
    assert first.finish_reason == "tool_calls"
    assert first.text is None
    assert second.text == "Paris"
    assert llm.requests[0]["tools"] == tools and llm.requests[0]["tool_choice"] == "auto"
    echoed = llm.requests[1].messages[2]["tool_calls"][0]
    assert echoed["id"] == call.id and json.loads(echoed["function"]["arguments"]) == call.arguments


async def test_malformed_tool_arguments_raise_llm_error(llm, provider):
    call = {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{query:"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    llm.enqueue(Reply.raw({"choices": [{"message": message, "finish_reason": "tool_calls"}]}))

    with pytest.raises(LLMError, match="malformed arguments for tool 'recall'"):
        await provider.complete(ASK, tools=[{"type": "function", "function": {"name": "recall"}}])


async def test_list_models(llm, provider):
    assert await provider.list_models() == ["scripted"]


def test_provider_factory():
    assert from_settings(Settings(llm_provider="none")) is None
    with pytest.raises(ValueError, match="unknown LLM provider 'cohere': use one of none, openai"):
        from_settings(Settings(llm_provider="cohere"))
    with pytest.raises(ValueError, match="ENGRAM_LLM_MODEL"):
        from_settings(Settings(llm_provider="ollama"))
    ollama = from_settings(Settings(llm_provider="Ollama", llm_model="qwen3"))
    assert (ollama.name, ollama.model, ollama.base_url) == ("ollama", "qwen3", "http://localhost:11434/v1")
    openai = from_settings(Settings(llm_provider="openai", llm_api_key="k"))
    assert (openai.model, openai.base_url) == ("gpt-4o-mini", "https://api.openai.com/v1")
