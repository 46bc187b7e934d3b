"""Shaping reflect's answer: what it was based on (only what the tools actually showed), and the
structured output a caller's JSON schema asks for."""

from __future__ import annotations

import json
from typing import Any

from engram.llm.base import LLMProvider, TokenUsage
from engram.reflect.tools import Seen
from engram.types import ReflectBasedOn, ReflectDirective, ReflectFact, ReflectMentalModel, ReflectRequest


def based_on(seen: Seen, cited: dict[str, Any], directives: list[Any]) -> ReflectBasedOn:
    """The memories, observations and mental models the answer cites, keeping only ids it was shown.
    With no citation (an answer given without `done`), everything shown counts."""
    memory_ids = [str(i) for i in [*(cited.get("memory_ids") or []), *(cited.get("observation_ids") or [])]]
    model_ids = [str(i) for i in cited.get("mental_model_ids") or []]
    if not cited:
        memory_ids, model_ids = list(seen.memories), list(seen.mental_models)
    memories = [
        ReflectFact(**{k: v for k, v in seen.memories[i].items() if k in ReflectFact.model_fields})
        for i in dict.fromkeys(memory_ids)
        if i in seen.memories
    ]
    models = [
        ReflectMentalModel(id=i, text=seen.mental_models[i]["content"] or "", context=seen.mental_models[i]["name"])
        for i in dict.fromkeys(model_ids)
        if i in seen.mental_models
    ]
    rules = [ReflectDirective(id=str(d["id"]), name=d["name"], content=d["content"]) for d in directives]
    return ReflectBasedOn(memories=memories, mental_models=models, directives=rules)


def _missing_required(schema: dict[str, Any], value: Any) -> str | None:
    if schema.get("type") == "object" and not isinstance(value, dict):
        return "the answer is not a JSON object"
    for key in schema.get("required", []) if isinstance(value, dict) else []:
        if key not in value:
            return f"missing required field '{key}'"
    return None


async def structured_output(
    llm: LLMProvider, request: ReflectRequest, answer: str
) -> tuple[dict[str, Any] | None, str | None, TokenUsage]:
    """Fit the answer into the caller's JSON schema: (output, None) or (None, why it failed)."""
    schema = request.response_schema or {}
    messages = [
        {"role": "system", "content": "Convert the answer into JSON matching the given schema. Use only "
                                      "information in the answer."},
        {"role": "user", "content": f"Question: {request.query}\n\nAnswer: {answer}\n\nSchema:\n{json.dumps(schema)}"},
    ]
    response = await llm.complete(messages, json_schema=schema, schema_name="reflect_response", temperature=0.0)
    from engram.llm.structured import extract_json

    try:
        value = extract_json(response.text or "")
    except ValueError as exc:
        return None, f"the model's output is not JSON: {exc}", response.usage
    problem = _missing_required(schema, value)
    if problem:
        return None, problem, response.usage
    return value, None, response.usage
