"""`engram serve`, `engram worker` and `engram mcp`: the commands that run Engram itself."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import Any

from engram import __version__
from engram.cli_command import UserError, add_command

log = logging.getLogger("engram.cli")


def _settings() -> Any:
    from engram.settings import Settings

    try:
        return Settings.from_env()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _check_llm(settings: Any) -> None:
    """Refuse a provider setting that cannot work before anything starts (no traceback, no
    half-started embedded PostgreSQL), and warn about a hosted provider with no key."""
    from engram.llm import check_settings

    try:
        for warning in check_settings(settings):
            log.warning("%s", warning)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def listen_socket(host: str, port: int) -> socket.socket:
    """Bind the server's socket up front: a port in use is then one clear error, before the
    database and the models start (uvicorn would find out only after them)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = "the port is already in use" if exc.errno in (98, 48, 10048) else exc.strerror or str(exc)
        raise UserError(f"cannot listen on {host}:{port}: {reason}; stop the other server or choose another port "
                        "(--port N or ENGRAM_PORT=N)") from None
    sock.set_inheritable(True)
    return sock


class _StartupErrorLine(logging.Filter):
    """uvicorn logs a failed start-up as the whole traceback; for Engram's own errors (a database that
    cannot be reached, a model file that is not there) its last line says all a user needs."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith("Traceback"):
            name, _, message = text.strip().splitlines()[-1].partition(": ")
            if name.startswith("engram.errors."):
                record.msg, record.args = "cannot start: %s", (message,)
        return True


def _display_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def cmd_serve(args: argparse.Namespace) -> int:
    import dataclasses

    import uvicorn

    from engram.api.app import create_app

    logging.basicConfig(level=os.environ.get("ENGRAM_LOG_LEVEL", "INFO").upper(),
                        format="%(levelname)s %(name)s: %(message)s")
    settings = _settings()
    host, port = args.host or settings.host, args.port or settings.port
    _check_llm(settings)
    sock = listen_socket(host, port)
    settings = dataclasses.replace(settings, host=host, port=port,
                                   worker_enabled=settings.worker_enabled and not args.no_worker)
    base = f"http://{_display_host(host)}:{sock.getsockname()[1]}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                log.info("Engram %s listening on %s — control plane %s/ui/", __version__, base, base)
                if not settings.worker_enabled:
                    log.info("no operations worker in this process: async retains, consolidations and "
                             "refreshes wait for an `engram worker` on the same database")

    server = Server(uvicorn.Config(create_app(settings, freeze_heap=True), log_level="warning"))
    logging.getLogger("uvicorn.error").addFilter(_StartupErrorLine())
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn's own exit after a failed start-up
        server.started = False
    if not server.started:
        raise UserError("the server did not start (the reason is logged above)")
    return 0


def _at_least_one(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"{count} is not at least 1")
    return count


def cmd_worker(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from engram.api.app import close_services, open_services, warm_models
    from engram.worker.runner import Worker

    logging.basicConfig(level=os.environ.get("ENGRAM_LOG_LEVEL", "INFO").upper(),
                        format="%(levelname)s %(name)s: %(message)s")
    settings = _settings()
    _check_llm(settings)

    async def run() -> None:
        svc = await open_services(settings)
        await asyncio.to_thread(warm_models, True)  # its retains embed; then its own objects are frozen
        worker = Worker(svc, concurrency=args.concurrency)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await worker.start()
        print(f"engram worker {worker.worker_id} running; Ctrl-C to stop", file=sys.stderr)
        await stop.wait()
        await worker.stop()
        await close_services(svc)

    asyncio.run(run())
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from engram.mcp.stdio import run_stdio

    # stdout carries the protocol: logs go to stderr.
    level = os.environ.get("ENGRAM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    run_stdio(bank_id=args.bank)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    serve = add_command(
        sub, common, "serve", cmd_serve, summary="run the HTTP server and the control plane",
        details="Starts the embedded PostgreSQL under $ENGRAM_HOME unless ENGRAM_DATABASE_URL names one, then "
                "serves the API, /mcp and the control plane at /ui/.",
        example="engram serve --port 9000      # or: ENGRAM_PORT=9000 engram serve",
    )
    serve.add_argument("--host", help="address to listen on (default $ENGRAM_HOST or 127.0.0.1; 0.0.0.0 for all)")
    serve.add_argument("--port", type=int, help="port to listen on (default $ENGRAM_PORT or 8888)")
    serve.add_argument("--no-worker", action="store_true",
                       help="serve the API only, with no operations worker (as ENGRAM_WORKER_ENABLED=false): "
                            "a stateless replica, with `engram worker` processes doing the background work")

    worker = add_command(
        sub, common, "worker", cmd_worker, summary="run a background operations worker",
        details="Claims async retains, consolidations and refreshes from the database the servers use "
                "(ENGRAM_DATABASE_URL); run as many as you like.",
        example="ENGRAM_DATABASE_URL=postgresql://engram@db/engram engram worker --concurrency 4",
    )
    worker.add_argument("--concurrency", type=_at_least_one, default=None,
                        help="operations run at once (default: ENGRAM_WORKER_MAX_SLOTS; 10 with an LLM, 2 without)")

    mcp = add_command(
        sub, common, "mcp", cmd_mcp, summary="serve MCP over stdio for desktop agents",
        details="For agents that start their tools as a subprocess (Claude Desktop, Cursor, ...).",
        example="engram mcp --bank my-bank",
    )
    mcp.add_argument("--bank", help="serve this bank only: its tools take no bank_id")
