"""`python -m engram.bytecode` (run by `make install`) leaves no module a server start imports to be
compiled at every start, even with PYTHONDONTWRITEBYTECODE set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# A server's start as far as it goes without a database: the app, the worker, the embedder and
# uvicorn's own loading of its event loop, HTTP and lifespan implementations. It prints every loaded
# module whose bytecode is not in the cache.
START = """
import importlib.util, os, sys
import uvicorn
from engram.api.app import create_app
from engram.settings import Settings
from engram.worker.runner import Worker
from engram.models.embedder import Embedder
import onnxruntime, tokenizers
uvicorn.Config(create_app(Settings()), log_level="warning").load()
for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None)
    if path and path.endswith(".py"):
        cached = importlib.util.cache_from_source(path)
        if not os.path.exists(cached):
            print(module.__name__)
"""


def run(code: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(cache)}
    return subprocess.run([sys.executable, *code], env=env, capture_output=True, text=True, timeout=300)


def test_the_bytecode_of_a_server_start_is_written_once(tmp_path: Path) -> None:
    cache = tmp_path / "pycache"
    before = run(["-c", START], cache)
    assert before.returncode == 0, before.stderr
    assert "engram.api.app" in before.stdout.split(), "nothing is compiled without it"

    written = run(["-m", "engram.bytecode"], cache)
    assert written.returncode == 0, written.stderr
    after = run(["-c", START], cache)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == []
