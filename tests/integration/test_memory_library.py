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
