"""The in-process library, exactly as the README shows it."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    match = re.search(r"<!-- library-example -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, "the README has the library example"
    return match.group(1)


def test_the_readme_example_runs(isolated_dsn: str, monkeypatch) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", isolated_dsn)
    printed: list[str] = []
    namespace = {"print": lambda *args: printed.append(" ".join(str(a) for a in args))}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    assert printed and "Acme" in printed[0]


async def test_async_methods(isolated_dsn: str) -> None:
    from engram import Memory

    with Memory(database_url=isolated_dsn) as memory:
        await memory.aretain("async-bank", "The rover landed in the Jezero crater.")
        results = (await memory.arecall("async-bank", "Where did the rover land?")).results
        assert "Jezero" in results[0].text
        assert await memory.abanks() == ["async-bank"]


def test_every_method_has_its_awaitable_twin(isolated_dsn: str) -> None:
    import inspect

    from engram import Memory

    public = {name for name, fn in inspect.getmembers(Memory, inspect.isfunction) if not name.startswith("_")}
    plumbing = {"close"}
    for name in public - plumbing:
        if name.startswith("a") and name[1:] in public:
            continue
        twin = getattr(Memory, f"a{name}", None)
        assert twin is not None and inspect.iscoroutinefunction(twin), f"Memory.{name} has no awaitable a{name}"
    readme_names = re.search(r"awaitable twin: ([a-z_, ]+)\.", readme_example())
    assert readme_names and {n.strip() for n in readme_names.group(1).split(",")} == {
        f"a{name}" for name in public - plumbing if not (name.startswith("a") and name[1:] in public)}


async def test_batch_retain_and_bank_deletion_awaited(isolated_dsn: str) -> None:
    from engram import Memory

    with Memory(database_url=isolated_dsn) as memory:
        stored = await memory.aretain_batch("batch-bank", [{"content": "The kiln reached 1200 degrees."},
                                                           {"content": "The glaze cracked overnight."}])
        assert stored["items_count"] == 2 and len(stored["memory_ids"]) == 2
        assert await memory.adelete_bank("batch-bank") is True
        assert await memory.abanks() == []


def test_the_client_example_closes_its_client(server) -> None:  # noqa: ANN001 - the server fixture
    import os
    import subprocess
    import sys

    match = re.search(r"<!-- client-example -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, "the README has the official-client example"
    code = match.group(1).replace("http://127.0.0.1:8888", server.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Alice joined Acme as a designer.")
    assert "Unclosed" not in result.stderr, result.stderr
