"""Which embeddings may wait: work no one is waiting on as it happens runs the model at a lower priority.

A bulk or queued retain, a consolidation, an import or a re-embedding keeps the embedder busy for
seconds to hours, and on a small machine the model is most of its CPU (~60 % of a bulk item's server
CPU). A recall or a one-item retain arriving meanwhile then shared the cores with it and took about
twice as long. Inside `background_embedding()` the model runs on threads of their own whose nice value
is `BACKGROUND_NICE` above the process's (Linux schedules threads apart), so when both want a core the
waiting request gets it first; when nothing else runs, the background work has the cores as before.

The flag is a context variable: tasks and `asyncio.to_thread` calls started inside the block carry it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Iterator

BACKGROUND_NICE = 10
MAX_NICE = 19

_in_background: contextvars.ContextVar[bool] = contextvars.ContextVar("engram_background_embedding", default=False)


@contextlib.contextmanager
def background_embedding() -> Iterator[None]:
    """Embeddings made inside the block (and in tasks and threads it starts) run at background priority."""
    token = _in_background.set(True)
    try:
        yield
    finally:
        _in_background.reset(token)


def mark_background() -> None:
    """The rest of the calling task (which has a context of its own) embeds at background priority."""
    _in_background.set(True)


def embedding_in_background() -> bool:
    return _in_background.get()


def lower_this_threads_priority() -> None:
    """Raise the calling thread's nice value by BACKGROUND_NICE (at most to 19). A thread's priority can
    be lowered but not raised back without privileges, so only threads that do background work alone
    call this. Only on Linux, where a thread has a nice value of its own: elsewhere the id of a thread
    given to setpriority would name a process."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        thread = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(MAX_NICE, nice + BACKGROUND_NICE))
