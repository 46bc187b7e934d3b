"""`engram mcp`: the MCP server over stdin/stdout, for desktop agents that start their memory as a
subprocess. It opens the store itself (the embedded PostgreSQL unless ENGRAM_DATABASE_URL is set)
and runs an operations worker, so a retain sent in the background completes without a server."""

from __future__ import annotations

import anyio

from engram.settings import Settings


async def serve_stdio(settings: Settings, *, bank_id: str | None = None) -> None:
    """Serve until stdin closes. With `bank_id`, tools serve that bank and take no `bank_id`."""
    from mcp.server.stdio import stdio_server

    from engram.api.app import close_services, open_services
    from engram.mcp.server import build_server

    # Enter the transport first: while it serves, fd 1 points at stderr, so nothing the store or
    # its subprocesses print can corrupt the protocol stream.
    async with stdio_server() as (read_stream, write_stream):
        services = await open_services(settings)
        worker = None
        try:
            if settings.worker_enabled:
                from engram.worker.runner import Worker

                worker = Worker(services)
                await worker.start()
            server = build_server(lambda: services, default_bank=bank_id)
            await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            with anyio.CancelScope(shield=True):
                if worker is not None:
                    await worker.stop()
                await close_services(services)


def run_stdio(bank_id: str | None = None) -> None:
    import asyncio

    asyncio.run(serve_stdio(Settings.from_env(), bank_id=bank_id))
