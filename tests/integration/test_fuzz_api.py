"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis): valid and
invalid requests to every operation of a live server must never get a server error (5xx).

No operation is excluded. Reproducible and bounded: schemathesis' coverage phase sends every boundary
case of the schema's valid inputs (about 5,400 requests, deterministic), then Hypothesis adds
`ENGRAM_FUZZ_EXAMPLES` (12) derandomized examples per operation, valid and invalid: about 80 s on
a shared 2-core machine. `ENGRAM_FUZZ_FULL=1` also sends every invalid case the coverage phase knows
(about 19,000 requests: 70-110 s there, over 3 minutes when the machine is busy).
The schema is the app's own, built in-process at collection (schemathesis' lazy fixture loader does
not work with pytest 9); a test checks that the live server publishes the same one."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig as Config

from engram.api.app import create_app
from engram.settings import Settings
from tests.conftest import RunningServer

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "12"))
COVERAGE_MODE = "all" if os.environ.get("ENGRAM_FUZZ_FULL") else "positive"

OPENAPI = create_app(Settings()).openapi()
schema = schemathesis.openapi.from_dict(
    OPENAPI, config=Config.from_dict({"phases": {"coverage": {"generation": {"mode": COVERAGE_MODE}}}})
)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        yield http


@pytest.fixture(scope="module")
def cases(server: RunningServer) -> Iterator[Counter[str]]:
    """Requests sent per operation; the totals are printed at the end (`pytest -s`)."""
    sent: Counter[str] = Counter()
    yield sent
    print(f"\nfuzzing sent {sum(sent.values())} requests to {len(sent)} operations "
          f"(coverage: {COVERAGE_MODE} cases; {EXAMPLES} generated examples at most; derandomized)")


def test_the_live_server_publishes_the_fuzzed_schema(server: RunningServer) -> None:
    assert requests.get(server.url + "/openapi.json", timeout=10).json() == json.loads(json.dumps(OPENAPI))


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_with_a_server_error(
    case: schemathesis.Case, server: RunningServer, session: requests.Session, cases: Counter[str]
) -> None:
    cases[case.operation.label] += 1
    response = case.call(base_url=server.url, session=session, timeout=60)
    assert response.status_code < 500, (
        f"{response.status_code} from {case.as_curl_command(base_url=server.url)}\n{response.text[:2000]}"
    )
