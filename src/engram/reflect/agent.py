"""The reflect agent loop: the LLM calls tools (mental models, observations, raw facts) until it calls
`done`, for at most 10 × {low 0.5, mid 1, high 2} iterations; the last iteration forces `done`, and a
conversation that outgrows the context cap ends with a synthesis call without tools."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from engram.errors import BankNotFound, LLMNotConfigured
from engram.llm.base import TokenUsage as LLMUsage
from engram.models.tokens import count_tokens
from engram.reflect import prompt
from engram.reflect.directives import active_directives
from engram.reflect.output import based_on, structured_output
from engram.reflect.tools import TOOLS, Toolbox
from engram.together import run_together
from engram.types import ReflectLLMCall, ReflectRequest, ReflectResponse, ReflectToolCall, ReflectTrace, TokenUsage

if TYPE_CHECKING:
    from engram.services import Services

ITERATIONS = 10
BUDGET_FACTOR = {"low": 0.5, "mid": 1.0, "high": 2.0}
CONTEXT_CAP_TOKENS = 24_000
FORCE_DONE = {"type": "function", "function": {"name": "done"}}
# The tool calls of one answer that run at once. A recall takes up to three of the pool's twenty
# connections: a model answering with dozens of calls must not take them all from other requests.
TOOL_CALLS_AT_ONCE = 4


class _Run:
    """One reflect call's conversation, usage and trace."""

    def __init__(self, services: Services, messages: list[dict[str, Any]]) -> None:
        self.services = services
        self.messages = messages
        self.usage = LLMUsage()
        self.trace = ReflectTrace()
        self.context_tokens = sum(count_tokens(str(m.get("content") or "")) for m in messages)

    async def call(self, scope: str, **options: Any) -> Any:
        started = time.perf_counter()
        response = await self.services.llm.complete(self.messages, temperature=0.2, **options)
        self.trace.llm_calls.append(ReflectLLMCall(scope=scope, duration_ms=int((time.perf_counter() - started) * 1000)))
        self.usage = self.usage + response.usage
        return response

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.context_tokens += count_tokens(str(message.get("content") or ""))


async def reflect(services: Services, bank_id: str, request: ReflectRequest) -> ReflectResponse:
    if services.llm is None:
        raise LLMNotConfigured("reflect")
    bank = await services.pool.fetchrow("SELECT mission FROM banks WHERE bank_id = $1", bank_id)
    if bank is None:
        raise BankNotFound(bank_id)
    config = await services.bank_config(bank_id)
    directives = await active_directives(services.pool, bank_id, request.tags, request.apply_all_directives)
    run = _Run(services, [
        {"role": "system", "content": prompt.system_prompt(config, directives, bank["mission"])},
        {"role": "user", "content": prompt.user_prompt(request.query, request.context)},
    ])
    toolbox = Toolbox(services, bank_id, request, config)
    answer, cited = await _loop(run, toolbox, max(1, round(ITERATIONS * BUDGET_FACTOR[request.budget])))

    response = ReflectResponse(text=answer)
    if request.response_schema is not None:
        response.structured_output, response.structured_output_error, extra = await structured_output(
            services.llm, request, answer
        )
        run.usage = run.usage + extra
    if request.include.facts is not None:
        response.based_on = based_on(toolbox.seen, cited, directives)
    if request.include.tool_calls is not None:
        if not request.include.tool_calls.output:
            for call in run.trace.tool_calls:
                call.output = None
        response.trace = run.trace
    response.usage = TokenUsage(
        input_tokens=run.usage.input_tokens, output_tokens=run.usage.output_tokens,
        total_tokens=run.usage.input_tokens + run.usage.output_tokens,
    )
    return response


async def _loop(run: _Run, toolbox: Toolbox, iterations: int) -> tuple[str, dict[str, Any]]:
    for iteration in range(iterations):
        if run.context_tokens > CONTEXT_CAP_TOKENS:
            break
        last = iteration == iterations - 1
        response = await run.call("reflect", tools=TOOLS, tool_choice=FORCE_DONE if last else "auto")
        if not response.tool_calls:
            return (response.text or "").strip(), {}
        run.add(response.assistant_message())
        calls = response.tool_calls
        done = next((call for call in calls if call.name == "done"), None)
        before_done = calls[: calls.index(done)] if done is not None else calls
        # One answer's calls are independent reads: they run TOOL_CALLS_AT_ONCE at a time (one after
        # another until session 36), their findings and results taken in the order asked.
        forks = [toolbox.fork() for _ in before_done]
        at_once = asyncio.Semaphore(TOOL_CALLS_AT_ONCE)
        outputs = await run_together(_timed(fork, call, at_once) for fork, call in zip(forks, before_done, strict=True))
        for fork in forks:
            toolbox.take(fork)
        for call, (output, duration_ms) in zip(before_done, outputs, strict=True):
            run.trace.tool_calls.append(ReflectToolCall(
                tool=call.name, input=call.arguments, output=output, iteration=iteration, duration_ms=duration_ms,
            ))
            run.add({"role": "tool", "tool_call_id": call.id, "content": json.dumps(output, default=str)})
        if done is not None:
            return str(done.arguments.get("answer") or "").strip(), done.arguments
    run.add({"role": "user", "content": prompt.SYNTHESIS})
    response = await run.call("synthesis")
    return (response.text or "").strip(), {}


async def _timed(toolbox: Toolbox, call: Any, at_once: asyncio.Semaphore) -> tuple[dict[str, Any], int]:
    async with at_once:
        started = time.perf_counter()
        output = await toolbox.run(call.name, call.arguments)
        return output, int((time.perf_counter() - started) * 1000)
