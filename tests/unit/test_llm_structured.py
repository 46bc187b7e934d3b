"""Typed LLM calls: validated pydantic output, bounded retries with the error fed back to the model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import BaseModel

from engram.errors import LLMError
from engram.llm import LLMProvider, TokenUsage, from_settings, generate_structured
from engram.llm.structured import InvalidOutput, extract_json, schema_of
from tests.support.scripted_llm import Reply, ScriptedLLM


class Answer(BaseModel):
    answer: int
    reason: str


ASK = [{"role": "system", "content": "Answer the question."}, {"role": "user", "content": "6 times 7?"}]
VALID = {"answer": 42, "reason": "multiplication"}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def llm(server: ScriptedLLM) -> ScriptedLLM:
    server.reset()
    return server


@pytest.fixture
async def provider(llm: ScriptedLLM) -> AsyncIterator[LLMProvider]:
    provider = from_settings(llm.settings())
    assert provider is not None
    yield provider
    await provider.aclose()


async def test_returns_the_validated_model_and_asks_with_its_schema(llm, provider):
    llm.enqueue(Reply.json(VALID, usage=(100, 20)))

    answer, usage = await generate_structured(provider, ASK, Answer)

    assert answer == Answer(answer=42, reason="multiplication")
    assert usage == TokenUsage(100, 20)
    assert llm.requests[0].schema_name == "Answer"
    assert llm.requests[0].schema == Answer.model_json_schema()


async def test_malformed_json_is_retried_with_the_error_and_usage_is_summed(llm, provider):
    llm.enqueue(Reply.text('{"answer": 42, "reason": '), Reply.json(VALID))

    answer, usage = await generate_structured(provider, ASK, Answer)

    assert answer.answer == 42
    assert len(llm.requests) == 2
    retry = llm.requests[1].messages
    assert retry[: len(ASK)] == ASK
    assert retry[-2] == {"role": "assistant", "content": '{"answer": 42, "reason": '}
    assert retry[-1]["role"] == "user" and "not valid JSON" in retry[-1]["content"]
    assert usage == TokenUsage(20, 10)


async def test_schema_violation_feedback_names_the_field(llm, provider):
    llm.enqueue(Reply.json({"answer": "forty-two", "reason": "guess"}), Reply.json(VALID))

    answer, _ = await generate_structured(provider, ASK, Answer)

    assert answer.answer == 42
    feedback = llm.requests[1].messages[-1]["content"]
    assert "answer:" in feedback and "integer" in feedback


async def test_garbage_forever_raises_after_max_attempts(llm, provider):
    llm.handler = lambda request: "I would rather not answer in JSON."

    with pytest.raises(LLMError) as failure:
        await generate_structured(provider, ASK, Answer, max_attempts=3)

    assert len(llm.requests) == 3
    assert "did not return valid Answer after 3 attempts" in failure.value.message
    assert "not valid JSON" in failure.value.message


async def test_truncated_answer_says_so(llm, provider):
    llm.handler = lambda request: Reply.text('{"answer": 4', finish_reason="length")

    with pytest.raises(LLMError, match="cut off at the token limit"):
        await generate_structured(provider, ASK, Answer, max_attempts=1)


async def test_json_wrapped_in_prose_is_accepted_without_a_retry(llm, provider):
    llm.enqueue(Reply.text('Sure! Here:\n```json\n{"answer": 42, "reason": "easy"}\n```\nAnything else?'))

    answer, _ = await generate_structured(provider, ASK, Answer)

    assert answer.reason == "easy"
    assert len(llm.requests) == 1


async def test_provider_failure_is_not_retried_as_bad_output(llm, provider):
    llm.enqueue(Reply.error(401, "invalid key"))

    with pytest.raises(LLMError, match="HTTP 401"):
        await generate_structured(provider, ASK, Answer)

    assert len(llm.requests) == 1


async def test_works_through_the_json_object_fallback(llm, provider):
    llm.supports_json_schema = False
    llm.handler = lambda request: VALID

    answer, _ = await generate_structured(provider, ASK, Answer)

    assert answer.answer == 42
    assert [r.response_format for r in llm.requests] == ["json_schema", "json_object"]


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": 1}',
        '```json\n{"answer": 1}\n```',
        'The answer: {"answer": 1} as requested.',
        '<think>maybe {"answer": 0}?</think>{"answer": 1}',
        'Result {not json} then {"answer": 1}',
    ],
)
def test_extract_json_finds_the_object(text):
    assert extract_json(text) == {"answer": 1}


def test_extract_json_without_json_says_so():
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        extract_json("no braces at all")


def test_the_schema_is_made_once_and_handed_out_as_a_copy() -> None:
    first = schema_of(Answer)
    assert first == Answer.model_json_schema()
    first["properties"]["answer"]["type"] = "string"  # a caller editing what it was given
    assert schema_of(Answer) == Answer.model_json_schema()


def test_the_schema_is_built_by_pydantic_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fresh(BaseModel):  # a class no other test has asked for yet
        verdict: str

    built = []
    original = Fresh.model_json_schema.__func__

    def counting(cls, *args, **kwargs):
        built.append(cls)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(Fresh, "model_json_schema", classmethod(counting))
    assert [schema_of(Fresh) for _ in range(3)] == [Fresh.model_json_schema()] * 3
    assert len(built) == 2  # the cached one, then the comparison's own
