"""Every server setting the code reads is in the README's configuration table.

Settings are found in src/ three ways: `ENGRAM_*` names written out, `read_env("name")` calls, and
the `get("name", default)` calls of `Settings.from_env`. Bank settings (read by name from
BANK_SETTINGS) are documented as a group and are not listed one by one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "engram"


def settings_in_code() -> dict[str, str]:
    """ENGRAM_<NAME> → the file that reads it."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        names = set(re.findall(r"\bENGRAM_([A-Z][A-Z0-9_]*[A-Z0-9])\b", text))
        names |= {n.upper() for n in re.findall(r"\bread_env\(\s*[\"']([a-z][a-z0-9_]*)[\"']", text)}
        if path.name == "settings.py":
            names |= {n.upper() for n in re.findall(r"\bget\(\s*[\"']([a-z][a-z0-9_]*)[\"']\s*,", text)}
        for name in names:
            found.setdefault(f"ENGRAM_{name}", str(path.relative_to(ROOT)))
    return found


def configuration_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Configuration\n")
    end = readme.index("\n## ", start + 1)
    return readme[start:end]


def test_the_scan_finds_settings_read_in_every_way() -> None:
    found = settings_in_code()
    assert {"ENGRAM_LOG_LEVEL", "ENGRAM_WORKER_POLL_INTERVAL", "ENGRAM_HOST", "ENGRAM_MCP_TOKEN", "ENGRAM_URL",
            "ENGRAM_API_KEY", "ENGRAM_LLM_PROVIDER"} <= set(found)


def test_every_setting_the_code_reads_is_in_the_configuration_table() -> None:
    table = "\n".join(line for line in configuration_section().splitlines() if line.startswith("| `"))
    missing = {name: where for name, where in settings_in_code().items()
               if f"`{name}`" not in table}
    assert not missing, f"settings read by the code but not in the README's configuration table: {missing}"
