"""Engram: long-term memory for AI agents, speaking Hindsight 1.1.0's HTTP API.

`from engram import Memory` gives the same capabilities in-process (see engram.memory)."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import engram` (and the CLI) stay fast: Memory pulls in the store and the models.
    if name == "Memory":
        from engram.memory import Memory

        return Memory
    raise AttributeError(name)
