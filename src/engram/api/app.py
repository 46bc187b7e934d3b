"""The FastAPI application: opens the store, the LLM and the in-process worker at start-up and
closes them at shutdown; each router is one resource of the contract."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from engram import __version__, ui
from engram.api import (
    aliases,
    attachments,
    audit_logs,
    banks,
    consolidation,
    directives,
    documents,
    documents_edit,
    entities,
    files,
    health,
    knowledge_base,
    llm_requests,
    memories,
    memories_edit,
    mental_models,
    metrics,
    observations,
    operations,
    reflect,
    retired,
    templates,
    tooling,
    transfer,
    webhooks,
)
from engram.api.alias_resolution import BankAliasResolution
from engram.api.auth import ApiKeyAuth, parse_api_keys
from engram.api.errors import UnexpectedErrors, install_error_handlers
from engram.api.limits import RequestLimits
from engram.api.metrics import RequestTiming
from engram.audit.middleware import AuditLog
from engram.link_counts import LinkCounts
from engram.llm.trace_context import TraceContext
from engram.mcp.http import mcp_router
from engram.services import Services
from engram.settings import Settings

log = logging.getLogger("engram.api")


def warm_models(freeze_heap: bool = False) -> None:
    """Load the embedding model (in the background, so the first retain or recall does not wait); with
    `freeze_heap` (a server process: `engram serve`, `engram worker`), first keep the tokenizer off its
    own thread pool (`tokenize_on_calling_threads`), and afterwards leave everything loaded so far out
    of the garbage collector's scans (engram.heap): a server process's own objects, not a library user's."""
    from engram.models.embedder import embed_query, tokenize_on_calling_threads

    if freeze_heap:
        tokenize_on_calling_threads()
    try:
        embed_query("warm-up")
    except Exception:  # a broken model shows up on first real use with its own error
        log.exception("embedding model failed to load")
    if freeze_heap:
        from engram.heap import freeze_long_lived_objects

        log.debug("%d long-lived objects frozen", freeze_long_lived_objects())


async def open_services(settings: Settings) -> Services:
    from engram.llm import from_settings
    from engram.llm.call_slots import BoundedProvider
    from engram.llm.metered import MeteredProvider
    from engram.models.embedder import use_model
    from engram.store.pool import open_store

    use_model(settings.embedding_model)  # an unknown or missing model stops the start before the database
    store = await open_store(settings)
    try:
        llm = from_settings(settings)
    except Exception:  # a misconfigured provider must not leave the embedded PostgreSQL running
        await store.close()
        raise
    if llm is not None:
        llm = MeteredProvider(llm)
        if settings.llm_trace_enabled:
            from engram.llm.tracing import TracingProvider

            llm = TracingProvider(llm, store, max_chars=settings.llm_trace_max_chars,
                                  retention_days=settings.llm_trace_retention_days)
        llm = BoundedProvider(llm, settings.llm_max_concurrent)  # outermost: a trace times the call, not its wait
    link_counts = LinkCounts(keep_seconds=settings.stats_link_counts_keep_seconds,
                             slow_seconds=settings.stats_link_counts_slow_ms / 1000)
    return Services(settings=settings, store=store, llm=llm, link_counts=link_counts)


async def close_services(svc: Services) -> None:
    if svc.llm is not None:
        await svc.llm.aclose()
    await svc.store.close()


def create_app(settings: Settings | None = None, freeze_heap: bool = False) -> FastAPI:
    """The HTTP API. `freeze_heap`: this process is the server (`engram serve`), so what it has loaded
    once warm is frozen out of the garbage collector's scans (engram.heap)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = await open_services(settings)
        app.state.services = svc
        threading.Thread(target=warm_models, args=(freeze_heap,), name="warm-models", daemon=True).start()
        worker = None
        if settings.worker_enabled:
            from engram.worker.runner import Worker

            worker = Worker(svc)
            await worker.start()
        app.state.worker = worker
        try:
            yield
        finally:
            if worker is not None:
                await worker.stop()
            await asyncio.shield(close_services(svc))

    app = FastAPI(title="Engram", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(TraceContext)  # innermost: which bank and operation an LLM call serves
    app.add_middleware(RequestTiming)
    app.add_middleware(RequestLimits, max_body_bytes=settings.max_request_bytes,
                       body_read_timeout=settings.body_read_timeout, max_upload_bytes=settings.max_upload_bytes)
    app.add_middleware(ApiKeyAuth, keys=parse_api_keys(settings.api_keys, settings.tenant_api_key))
    app.add_middleware(AuditLog, enabled=settings.audit_log_enabled, reads=settings.audit_log_reads,
                       retention_days=settings.audit_log_retention_days)  # sees refusals and the real bank
    app.add_middleware(BankAliasResolution)  # outside the key check: keys are matched against the real bank
    app.add_middleware(UnexpectedErrors)  # outermost: an error escaping anything inside answers a clean 500
    routers = (health, banks, memories, reflect, documents, entities, consolidation, observations, mental_models,
               directives, templates, operations, metrics)
    routers += (memories_edit, documents_edit, transfer, attachments, files)  # issue 16: edit, move, files
    routers += (tooling, retired, aliases, webhooks, audit_logs, llm_requests, knowledge_base)  # issue 17
    for module in routers:
        app.include_router(module.router)
    app.include_router(mcp_router())  # /mcp and /mcp/{bank_id}/, with its own lifespan
    ui.mount(app)  # the control plane: static pages at /ui
    return app
