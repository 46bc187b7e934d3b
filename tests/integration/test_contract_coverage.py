"""Every method+path of the live Hindsight 1.1.0 contract is served by Engram (path-parameter names
aside), read from the contract file and from the running server's /openapi.json.

Operations not built yet are listed below, in a set named after the issue that adds them. When that
issue lands, empty the set: the test fails on a stale entry (an operation listed as missing that is
now served), and on any new gap.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from tests.conftest import RunningServer

CONTRACT = Path(__file__).resolve().parents[2] / ".." / "shared" / "contract" / "hindsight-1.1.0-live.openapi.json"
METHODS = ("get", "put", "post", "patch", "delete")
BANK = "/v1/default/banks/{}"

# Issue 16 (files, attachments, document transfer, bank transfer and clone): another branch adds them.
# Operations of the contract not served yet: none. A new one listed here must also fail the test
# below once it is served, so the set cannot go stale.
EXPECTED_MISSING: frozenset[tuple[str, str]] = frozenset()


def operations(spec: dict) -> set[tuple[str, str]]:
    """(METHOD, path with every {parameter} written as {}) for each operation of an OpenAPI spec."""
    return {(method.upper(), re.sub(r"\{[^}]*\}", "{}", path))
            for path, item in spec["paths"].items() for method in item if method in METHODS}


def test_contract_file_is_the_whole_live_api() -> None:
    contract = json.loads(CONTRACT.read_text())
    assert contract["info"]["version"] == "1.1.0"
    assert len(operations(contract)) == 101


def test_every_contract_operation_is_served(server: RunningServer) -> None:
    contract = operations(json.loads(CONTRACT.read_text()))
    served = operations(httpx.get(server.url + "/openapi.json", timeout=30).json())
    missing = contract - served
    new_gaps = sorted(missing - EXPECTED_MISSING)
    assert not new_gaps, "contract operations Engram does not serve:\n" + "\n".join(f"{m} {p}" for m, p in new_gaps)
    stale = sorted(EXPECTED_MISSING - missing)
    assert not stale, "served now, remove from the expected-missing sets:\n" + "\n".join(f"{m} {p}" for m, p in stale)
    assert contract >= EXPECTED_MISSING, "an expected-missing entry is not in the contract (typo?)"
