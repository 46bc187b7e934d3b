"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis): valid and
invalid requests to every operation of a live server must never get a server error (5xx).

Bounded and reproducible: a few examples per operation, derandomized (the same cases every run).
`ENGRAM_FUZZ_EXAMPLES=50` explores more. The schema is the app's own, built in-process at collection
(schemathesis' lazy fixture loader does not work with pytest 9); a test checks the live server
publishes the same one."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from engram.api.app import create_app
from engram.settings import Settings
from tests.conftest import RunningServer

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "12"))


OPENAPI = create_app(Settings()).openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)


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
          f"({EXAMPLES} examples each at most, derandomized); server log: {server.log_path}")
    import shutil; shutil.copy(server.log_path, "/tmp/fuzz-server.log")  # TEMP


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
