"""The MCP server, driven by the official MCP Python client: streamable HTTP against a live `engram
serve` (every bank at /mcp, one bank at /mcp/{bank_id}/), the bearer token, and `engram mcp` over stdio."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import RunningServer, start_server

ALL_TOOLS = {
    "retain", "sync_retain", "recall", "reflect", "list_banks", "create_bank", "get_bank_stats", "list_memories",
    "get_memory", "delete_document", "list_entities", "list_operations", "get_operation", "list_mental_models",
    "get_mental_model",
}
MULTI_BANK_ONLY = {"list_banks", "create_bank"}


@asynccontextmanager
async def connect(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def refused(session: ClientSession, tool: str, /, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.content[0].text
    return result.content[0].text


def texts(recalled: dict[str, Any]) -> list[str]:
    return [r["text"] for r in recalled["results"]]


async def test_every_bank_endpoint_lists_tools_that_take_bank_id(server: RunningServer) -> None:
    async with connect(server.url + "/mcp") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == ALL_TOOLS
    for name, tool in tools.items():
        assert tool.description
        required = tool.input_schema.get("required", [])
        assert ("bank_id" in required) == (name != "list_banks"), name
    assert tools["recall"].input_schema["properties"]["budget"]["enum"] == ["low", "mid", "high"]


async def test_retain_recall_browse_and_delete(server: RunningServer, bank_id: str) -> None:
    async with connect(server.url + "/mcp") as session:
        bank = await call(session, "create_bank", bank_id=bank_id, name="Team memory", mission="Remember the team")
        assert bank["name"] == "Team memory"
        stored = await call(session, "sync_retain", bank_id=bank_id, content="Alice joined Acme as a designer.",
                            document_id="onboarding", tags=["team"], context="HR notes")
        assert stored["success"] and stored["memories"] >= 1

        recalled = await call(session, "recall", bank_id=bank_id, query="Where does Alice work?")
        assert any("Acme" in text for text in texts(recalled))

        listed = await call(session, "list_memories", bank_id=bank_id)
        assert listed["total"] >= 1 and listed["items"][0]["tags"] == ["team"]
        memory = await call(session, "get_memory", bank_id=bank_id, memory_id=listed["items"][0]["id"])
        assert "Acme" in memory["text"] and memory["document_id"] == "onboarding"

        entities = await call(session, "list_entities", bank_id=bank_id)
        assert {"Alice", "Acme"} & {e["name"] for e in entities["items"]}
        stats = await call(session, "get_bank_stats", bank_id=bank_id)
        assert stats["total_memories"] == listed["total"] and stats["total_documents"] == 1
        banks = await call(session, "list_banks", q=bank_id)
        assert [b["bank_id"] for b in banks["banks"]] == [bank_id]

        deleted = await call(session, "delete_document", bank_id=bank_id, document_id="onboarding")
        assert deleted["memory_units_deleted"] == listed["total"]
        assert (await call(session, "list_memories", bank_id=bank_id))["total"] == 0
        assert "not found" in await refused(session, "delete_document", bank_id=bank_id, document_id="onboarding")


async def test_async_retain_returns_an_operation_that_completes(server: RunningServer, bank_id: str) -> None:
    async with connect(server.url + "/mcp") as session:
        queued = await call(session, "retain", bank_id=bank_id, content="Bob moved to Lisbon in 2021.")
        operation_id = queued["operation_id"]
        deadline = time.monotonic() + 30
        while True:
            operations = await call(session, "list_operations", bank_id=bank_id)
            status = {op["operation_id"]: op["status"] for op in operations["operations"]}[operation_id]
            if status == "completed" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert status == "completed"
        operation = await call(session, "get_operation", bank_id=bank_id, operation_id=operation_id)
        assert operation["type"] == "retain" and operation["result"]["facts"] >= 1
        assert any("Lisbon" in text for text in texts(await call(session, "recall", bank_id=bank_id,
                                                                 query="Where does Bob live?")))


async def test_errors_are_tool_results_naming_the_problem(server: RunningServer, bank_id: str) -> None:
    async with connect(server.url + "/mcp") as session:
        assert "bank_id" in await refused(session, "recall", query="anything")
        assert "not found" in await refused(session, "list_memories", bank_id=bank_id)
        assert "invalid arguments" in await refused(session, "recall", bank_id=bank_id, query="x", budget="huge")
        assert "unknown tool" in await refused(session, "forget_everything", bank_id=bank_id)
        await call(session, "sync_retain", bank_id=bank_id, content="Carol likes tea.")
        assert "LLM" in await refused(session, "reflect", bank_id=bank_id, query="What does Carol like?")
        models = await session.call_tool("list_mental_models", {"bank_id": bank_id})
        assert models.is_error or json.loads(models.content[0].text)["total"] == 0


async def test_single_bank_endpoint(server: RunningServer, bank_id: str, http: httpx.Client) -> None:
    async with connect(f"{server.url}/mcp/{bank_id}/") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == ALL_TOOLS - MULTI_BANK_ONLY
        assert all("bank_id" not in tool.input_schema["properties"] for tool in tools.values())
        await call(session, "sync_retain", content="Dana runs the Berlin office.")
        assert any("Berlin" in text for text in texts(await call(session, "recall", query="Who runs Berlin?")))
        assert "bank_id" in await refused(session, "recall", bank_id="other-bank", query="Berlin")

    # The bank's mcp_enabled_tools chooses what its endpoint offers.
    response = http.patch(f"/v1/default/banks/{bank_id}/config",
                          json={"updates": {"mcp_enabled_tools": ["recall", "sync_retain"]}})
    assert response.status_code == 200, response.text
    async with connect(f"{server.url}/mcp/{bank_id}") as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == {"recall", "sync_retain"}
        assert "not enabled" in await refused(session, "list_memories")
    async with connect(server.url + "/mcp") as session:
        assert "not enabled" in await refused(session, "list_memories", bank_id=bank_id)
    # Hindsight's X-Bank-Id header picks the bank on /mcp.
    async with connect(server.url + "/mcp", {"X-Bank-Id": bank_id}) as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == {"recall", "sync_retain"}


async def test_discovery_era_client(server: RunningServer, bank_id: str) -> None:
    """The SDK's high-level client negotiates the newest protocol (no initialize handshake)."""
    async with Client(f"{server.url}/mcp/{bank_id}/") as client:
        await client.call_tool("sync_retain", {"content": "Erin owns the billing service."})
        result = await client.call_tool("recall", {"query": "Who owns billing?"})
    assert not result.is_error
    assert any("billing" in text for text in texts(json.loads(result.content[0].text)))


async def test_bearer_token(isolated_dsn: str) -> None:
    running = start_server(isolated_dsn, {"HINDSIGHT_API_MCP_AUTH_TOKEN": "s3cret"}, name="mcp-token")
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            response = httpx.post(running.url + "/mcp", json=body, headers=headers)
            assert response.status_code == 401, (headers, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
        assert httpx.post(running.url + "/mcp/some-bank/", json=body).status_code == 401
        async with connect(running.url + "/mcp", {"Authorization": "Bearer s3cret"}) as session:
            assert await call(session, "list_banks") == {"banks": [], "total": 0, "limit": 100, "offset": 0}
        assert httpx.get(running.url + "/health").status_code == 200  # the rest of the API is not affected
        # Stateless: no standalone event stream to open (the spec's 405), rather than one that never speaks.
        assert httpx.get(running.url + "/mcp", headers={"Authorization": "Bearer s3cret"}).status_code == 405
    finally:
        running.stop()


async def test_stdio(isolated_dsn: str, bank_id: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram.cli", "mcp"],
        env={"ENGRAM_DATABASE_URL": isolated_dsn, "ENGRAM_WORKER_POLL_INTERVAL": "0.2"},
    )
    with open(_stdio_log(), "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert {tool.name for tool in (await session.list_tools()).tools} == ALL_TOOLS
            await call(session, "sync_retain", bank_id=bank_id, content="Frank keeps bees in Kent.")
            banks = await call(session, "list_banks")
            assert [b["bank_id"] for b in banks["banks"]] == [bank_id]
            recalled = await call(session, "recall", bank_id=bank_id, query="Who keeps bees?")
            assert any("bees" in text for text in texts(recalled))


def _stdio_log() -> str:
    from tests.conftest import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / "mcp-stdio.log")
