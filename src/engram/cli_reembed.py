"""`engram reembed`: re-embed the database with ENGRAM_EMBEDDING_MODEL (see engram.reembed)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

from engram.cli_command import UserError, add_command


def cmd_reembed(args: argparse.Namespace) -> int:
    import asyncio

    from engram.cli_server import _settings
    from engram.errors import EngramError
    from engram.models.embedder import use_model
    from engram.reembed import reembed
    from engram.store.pool import open_store

    logging.basicConfig(level=os.environ.get("ENGRAM_LOG_LEVEL", "WARNING").upper(),
                        format="%(levelname)s %(name)s: %(message)s")
    settings = _settings()

    async def run() -> Any:
        use_model(settings.embedding_model)
        store = await open_store(settings, check_embedding_model=False)
        try:
            return await reembed(store.pool, settings.embedding_model,
                                 lambda line: print(line, file=sys.stderr, flush=True))
        finally:
            await store.close()

    started = time.perf_counter()
    try:
        done = asyncio.run(run())
    except EngramError as exc:
        raise UserError(exc.message) from None
    print(f"re-embedded with {done.model} (was {done.previous or 'not recorded'}): {done.units:,} memories, "
          f"{done.sentences:,} sentence vectors, {done.mental_models:,} mental models in "
          f"{time.perf_counter() - started:.1f} s")
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    add_command(
        sub, common, "reembed", cmd_reembed,
        summary="re-embed every stored memory with ENGRAM_EMBEDDING_MODEL",
        details="Makes every vector of the database again (memories, their sentence vectors, mental models) "
                "with the configured model, in one transaction, and records the model, so servers configured "
                "with it start. Stop the servers and workers on the database first.",
        example="ENGRAM_EMBEDDING_MODEL=e5-small engram reembed",
    )
