"""The MCP server over Engram's tools: lists them and calls them, for every bank (tools take `bank_id`)
or for one bank (the endpoint's; tools take no `bank_id`, and the bank's `mcp_enabled_tools` setting
chooses which are offered)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.server.lowlevel import Server
from pydantic import ValidationError

from engram import __version__
from engram.errors import EngramError, InvalidInput
from engram.mcp import BANK_SCOPE_KEY
from engram.mcp.tools import TOOLS, ToolSpec
from engram.store import aliases as alias_store

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from engram.services import Services

log = logging.getLogger("engram.mcp")

INSTRUCTIONS = (
    "Engram is long-term memory. Call recall before answering anything that may depend on what the user "
    "said or did before; call retain (or sync_retain, to recall it at once) whenever they share facts, "
    "preferences, plans or events worth keeping."
)
BANK_ID_PROPERTY = {"type": "string", "description": "The memory bank (one per agent, user or purpose)"}


def _tidy(prop: dict[str, Any]) -> dict[str, Any]:
    """A property schema as an agent wants it: no titles, optional values without the null branch."""
    prop = {key: value for key, value in prop.items() if key != "title"}
    branches = prop.pop("anyOf", None)
    if branches is not None:
        kept = [b for b in branches if b.get("type") != "null"]
        if len(kept) == 1:
            prop = {**_tidy(kept[0]), **prop}
        else:
            prop["anyOf"] = [_tidy(b) for b in kept]
    if "default" in prop and prop["default"] is None:
        del prop["default"]
    if isinstance(prop.get("items"), dict):
        prop["items"] = _tidy(prop["items"])
    return prop


def input_schema(spec: ToolSpec, *, with_bank_id: bool) -> dict[str, Any]:
    schema = spec.args.model_json_schema()
    properties = {name: _tidy(prop) for name, prop in schema.get("properties", {}).items()}
    required = list(schema.get("required", []))
    if with_bank_id:
        properties = {"bank_id": BANK_ID_PROPERTY, **properties}
        required.insert(0, "bank_id")
    result: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        result["required"] = required
    return result


def offered(bank_id: str | None) -> list[ToolSpec]:
    """The tools of a multi-bank endpoint (bank_id None), or those a single-bank endpoint can offer."""
    return [spec for spec in TOOLS.values() if bank_id is None or spec.single_bank]


def enabled_tools(config: dict[str, Any]) -> set[str] | None:
    names = config.get("mcp_enabled_tools")
    return None if names is None else set(names)


def _result(value: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=value)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return "invalid arguments: " + "; ".join(problems)


class EngramTools:
    """The handlers behind `tools/list` and `tools/call`. `services` is called per request, since the
    HTTP app opens its services after the MCP server is built; `default_bank` serves one bank when
    the request does not name one (stdio with `--bank`)."""

    def __init__(self, services: Callable[[], Services], default_bank: str | None = None) -> None:
        self.services = services
        self.default_bank = default_bank

    def endpoint_bank(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        request = ctx.request
        scope = getattr(request, "scope", None)
        if scope is not None:
            return scope.get(BANK_SCOPE_KEY)
        return self.default_bank

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        bank_id = self.endpoint_bank(ctx)
        specs = offered(bank_id)
        if bank_id is not None:
            enabled = enabled_tools(await self.services().bank_config(bank_id))
            specs = [spec for spec in specs if enabled is None or spec.name in enabled]
        tools = [
            types.Tool(name=spec.name, description=spec.description,
                       input_schema=input_schema(spec, with_bank_id=bank_id is None and spec.per_bank))
            for spec in specs
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        endpoint_bank = self.endpoint_bank(ctx)
        spec = TOOLS.get(params.name)
        if spec is None or spec not in offered(endpoint_bank):
            where = f"on the endpoint of bank '{endpoint_bank}'" if endpoint_bank else "here"
            return _error(f"unknown tool '{params.name}' {where}")
        arguments = dict(params.arguments or {})
        try:
            return _result(await self._run(spec, endpoint_bank, arguments))
        except ValidationError as exc:
            return _error(_validation_message(exc))
        except EngramError as exc:
            return _error(exc.message)
        except Exception as exc:  # the agent gets a reason; the log gets the traceback
            log.exception("MCP tool %s failed", spec.name)
            return _error(f"internal error: {type(exc).__name__}: {exc}")

    async def _run(self, spec: ToolSpec, endpoint_bank: str | None, arguments: dict[str, Any]) -> dict[str, Any]:
        svc = self.services()
        bank_id = endpoint_bank
        if endpoint_bank is None and spec.per_bank:
            bank_id = arguments.pop("bank_id", None)
            if not isinstance(bank_id, str) or not bank_id.strip():
                raise InvalidInput("bank_id", "required: the memory bank to use")
        args = spec.args.model_validate(arguments)
        if bank_id is not None:
            bank_id = await alias_store.resolve(svc.pool, bank_id) or bank_id  # an alias reaches its bank
            enabled = enabled_tools(await svc.bank_config(bank_id))
            if enabled is not None and spec.name not in enabled:
                raise InvalidInput("name", f"tool '{spec.name}' is not enabled for bank '{bank_id}' "
                                           f"(its mcp_enabled_tools setting)")
        return await spec.run(svc, bank_id, args)


def build_server(services: Callable[[], Services], *, default_bank: str | None = None) -> Server[Any]:
    handlers = EngramTools(services, default_bank)
    return Server(
        "engram",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        # For the SDK's header checks (we map no argument to a header): saves a tools/list per call.
        get_tool_input_schema=_schema_by_name,
    )


def _schema_by_name(name: str) -> dict[str, Any] | None:
    spec = TOOLS.get(name)
    return None if spec is None else input_schema(spec, with_bank_id=False)
