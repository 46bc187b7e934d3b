"""A server process tokenizes batches on the calling thread: the tokenizers library's own thread pool
(started by the first `encode_batch` of more than one text) would spin on the cores the model and
PostgreSQL need. The library leaves the host's setting alone. Each case runs in a fresh interpreter:
the pool, once started, stays for the process's life."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, os, sys, threading

def foreign_threads():  # native threads that are not Python's (the tokenizers' pool, the model's)
    return {int(t) for t in os.listdir("/proc/self/task")} - {t.native_id for t in threading.enumerate()}

from engram.api.app import warm_models
from engram.models.embedder import embedder
from engram.models.tokens import count_tokens_batch

warm_models(freeze_heap=sys.argv[1] == "server")
before = foreign_threads()
texts = ["Leila moved to Lisbon.", "Omar works as a nurse.", "Ana adopted a cat in May 2021."]
count_tokens_batch(texts)
embedder().embed(texts)
print(json.dumps({"setting": os.environ.get("TOKENIZERS_PARALLELISM"),
                  "new_threads": len(foreign_threads() - before)}))
"""


def _run(mode: str, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"} | env
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=environment,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_server_process_tokenizes_batches_without_a_thread_pool() -> None:
    assert _run("server") == {"setting": "false", "new_threads": 0}


def test_the_library_and_an_explicit_setting_are_left_as_they_are() -> None:
    library = _run("library")
    assert library["setting"] is None
    assert library["new_threads"] > 0  # the pool the server process avoids
    assert _run("server", TOKENIZERS_PARALLELISM="true")["setting"] == "true"
