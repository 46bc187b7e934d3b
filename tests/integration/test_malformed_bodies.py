"""Malformed requests get a 4xx naming the field, never a 500 or a silent misreading: raw surrogate
bytes, UTF-16 bodies, NaN/Infinity and numbers past 64 bits, time-zone offsets of ±24 h, invalid
UTF-8, absurd nesting, non-boolean booleans, numbers past a column's range, unknown values of list
parameters; a mental model refused for want of an LLM is not created; a body that never arrives
is answered 408 after `ENGRAM_BODY_READ_TIMEOUT`."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest

JSON = {"content-type": "application/json"}


def memories(bank: str) -> str:
    return f"/v1/default/banks/{bank}/memories"


def refused(response: httpx.Response, status: int, field: str, *words: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["field"] == field, body
    text = json.dumps(body["detail"])
    for word in words:
        assert word in text, body
    return body


def nothing_stored(http: httpx.Client, bank: str) -> None:
    assert http.get(f"/v1/default/banks/{bank}/config").status_code == 404, "the bank was created"


# --- item 6: six families of malformed bodies -----------------------------------------------------


def test_raw_surrogate_bytes_are_400_naming_the_field(http: httpx.Client, bank_id: str) -> None:
    raw = b'{"items": [{"content": "ok", "metadata": {"k": "a \xed\xa0\x80 b"}}]}'  # U+D800 as UTF-8 bytes
    refused(http.post(memories(bank_id), content=raw, headers=JSON), 400, "items[0].metadata.k", "surrogate")
    nothing_stored(http, bank_id)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_utf16_bodies_are_read_and_checked_like_utf8(http: httpx.Client, bank_id: str, encoding: str) -> None:
    lone = '{"items": [{"content": "ok \ud800 there"}]}'.encode(encoding, "surrogatepass")
    refused(http.post(memories(bank_id), content=lone, headers=JSON), 400, "items[0].content", "surrogate")
    escaped = '{"items": [{"content": "ok", "tags": ["a\\u0000"]}]}'.encode(encoding)
    refused(http.post(memories(bank_id), content=escaped, headers=JSON), 400, "items[0].tags[0]", "NUL")
    nothing_stored(http, bank_id)
    fine = '{"items": [{"content": "Zoë keeps the keys 🔑.", "document_id": "u"}]}'.encode(encoding)
    assert http.post(memories(bank_id), content=fine, headers=JSON).status_code == 200
    assert http.get(f"/v1/default/banks/{bank_id}/documents/u").json()["original_text"] == "Zoë keeps the keys 🔑."


@pytest.mark.parametrize(
    ("path", "raw", "field", "word"),
    [
        ("/memories", '{"items": [{"content": "ok", "metadata": {"a": NaN}}]}', "items[0].metadata.a", "NaN"),
        ("/memories", '{"items": [{"content": "ok", "timestamp": Infinity}]}', "items[0].timestamp", "Infinity"),
        ("/memories", '{"items": [{"content": "ok", "timestamp": -Infinity}]}', "items[0].timestamp", "Infinity"),
        ("/memories/recall", '{"query": "ok", "max_tokens": NaN}', "max_tokens", "NaN"),
        ("/memories/recall", '{"query": "ok", "max_tokens": 1e400}', "max_tokens", "64-bit float"),
        ("/memories/recall", '{"query": "ok", "max_tokens": 123456789012345678901234567890}', "max_tokens",
         "64-bit integer"),
        ("/memories/recall", '{"query": "ok", "max_tokens": ' + "9" * 5000 + "}", "max_tokens", "64-bit integer"),
    ],
)
def test_non_finite_and_huge_numbers_are_400_naming_the_field(
    http: httpx.Client, bank_id: str, path: str, raw: str, field: str, word: str
) -> None:
    url = f"/v1/default/banks/{bank_id}{path}"
    refused(http.post(url, content=raw.encode(), headers=JSON), 400, field, word)


@pytest.mark.parametrize("offset", ["+24:00", "-24:00", "+25:30", "-99:00"])
def test_offsets_of_a_day_or_more_are_400_naming_the_field(http: httpx.Client, bank_id: str, offset: str) -> None:
    item = {"content": "ok", "timestamp": f"2024-05-08T13:56:00{offset}"}
    refused(http.post(memories(bank_id), json={"items": [item]}), 400, "items[0].timestamp", offset)
    http.put(f"/v1/default/banks/{bank_id}-list", json={})
    listed = http.get(f"{memories(bank_id + '-list')}/list", params={"start_date": f"2024-05-08T00:00:00{offset}"})
    refused(listed, 400, "start_date", offset)
    written = {"content": "ok", "timestamp": f"May 8, 2023 13:56 {offset.replace(':', '')}"}
    refused(http.post(memories(bank_id), json={"items": [written]}), 400, "items[0].timestamp")
    window = {"query": "ok", "temporal_window": {"start": f"2024-05-08T00:00:00{offset}", "end": "2024-05-09"}}
    refused(http.post(f"{memories(bank_id)}/recall", json=window), 422, "temporal_window.start")
    nothing_stored(http, bank_id)


def test_an_offset_just_under_a_day_is_a_date(http: httpx.Client, bank_id: str) -> None:
    item = {"content": "The ferry left at dawn.", "timestamp": "2024-05-08T13:56:00+23:59"}
    assert http.post(memories(bank_id), json={"items": [item]}).status_code == 200


# --- item 9: bodies that do not parse, booleans, ranges ---------------------------------------------


def test_invalid_utf8_is_400_naming_the_body(http: httpx.Client, bank_id: str) -> None:
    raw = b'{"items": [{"content": "caf\xe9 au lait"}]}'  # Latin-1, not UTF-8
    refused(http.post(memories(bank_id), content=raw, headers=JSON), 400, "body", "UTF-8")


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_deep_nesting_is_400_naming_the_limit(http: httpx.Client, bank_id: str, depth: int) -> None:
    raw = '{"items": [{"content": "ok", "metadata": ' + "[" * depth + "]" * depth + "}]}"
    response = http.post(memories(bank_id), content=raw.encode(), headers=JSON)
    assert response.status_code == 400, response.text
    body = response.json()
    assert "nested deeper than 32 levels" in body["detail"], body
    assert body["field"] in ("body", "items[0].metadata" + "[0]" * 29), body
    assert http.get("/health", timeout=5).status_code == 200


def test_nesting_within_the_limit_reaches_the_handler(http: httpx.Client, bank_id: str) -> None:
    schema: dict = {"type": "string"}
    for _ in range(10):  # 20 levels of objects inside the body
        schema = {"type": "object", "properties": {"x": schema}}
    response = http.post(f"/v1/default/banks/{bank_id}/reflect", json={"query": "q", "response_schema": schema})
    assert response.status_code == 400 and response.json()["error"] == "LLMNotConfigured", response.text


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "1", None])
def test_booleans_are_strict(http: httpx.Client, bank_id: str, value: object) -> None:
    body = {"items": [{"content": "ok"}], "async": value}
    refused(http.post(memories(bank_id), json=body), 422, "async", "boolean")
    item = {"content": "ok", "resolve_entities": value}
    refused(http.post(memories(bank_id), json={"items": [item]}), 422, "items[0].resolve_entities")
    nothing_stored(http, bank_id)


def test_numbers_past_a_columns_range_name_the_field(http: httpx.Client, bank_id: str) -> None:
    directive = {"name": "d", "content": "Be brief.", "priority": 2**40}
    refused(http.post(f"/v1/default/banks/{bank_id}/directives", json=directive), 422, "priority", "2147483647")
    model = {"name": "m", "source_query": "q", "max_tokens": 2**40}
    refused(http.post(f"/v1/default/banks/{bank_id}/mental-models", json=model), 422, "max_tokens", "2147483647")
    refused(http.get(f"/v1/default/banks/{bank_id}/mental-models", params={"offset": 2**40}), 422, "offset")
    refused(http.get(f"/v1/default/banks/{bank_id}/directives", params={"offset": 2**40}), 422, "offset")


# --- item 9: list parameters with unknown values ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "param", "allowed"),
    [
        ("/memories/list", "consolidation_state", "pending, done, consolidated, failed"),
        ("/memories/list", "state", "valid, invalidated"),
        ("/memories/list", "time_field", "created_at, updated_at, mentioned_at, occurred_start, occurred_end"),
        ("/entities", "sort", "mentions, name, recent"),
        ("/graph", "type", "world, experience, observation"),
        ("/tags", "source", "memories, mental_models"),
        ("/operations", "status", "pending, processing, completed, failed, cancelled"),
        ("/mental-models", "tags_match", "any, all, exact"),
        ("/mental-models", "detail", "metadata, content, full"),
        ("/directives", "tags_match", "any, all, exact"),
    ],
)
def test_unknown_parameter_values_are_400_naming_the_parameter(
    http: httpx.Client, bank_id: str, path: str, param: str, allowed: str
) -> None:
    http.put(f"/v1/default/banks/{bank_id}", json={})
    url = f"/v1/default/banks/{bank_id}{path}"
    refused(http.get(url, params={param: "bogus"}), 400, param, allowed, "'bogus'")
    first = allowed.split(", ")[0]
    assert http.get(url, params={param: first}).status_code == 200


def test_one_mental_model_detail_is_checked_too(http: httpx.Client, bank_id: str) -> None:
    refused(http.get(f"/v1/default/banks/{bank_id}/mental-models/m1", params={"detail": "all"}), 400, "detail")


def test_hindsight_time_fields_pick_the_column(http: httpx.Client, bank_id: str) -> None:
    item = {"content": "The bridge opened in spring.", "timestamp": "2020-04-01T00:00:00Z"}
    assert http.post(memories(bank_id), json={"items": [item]}).status_code == 200

    def listed(field: str, start: str) -> int:
        params = {"time_field": field, "start_date": start}
        return http.get(f"{memories(bank_id)}/list", params=params).json()["total"]

    assert listed("mentioned_at", "2021-01-01") == 0  # mentioned in 2020
    assert listed("created_at", "2021-01-01") == 1  # stored now
    assert listed("mentioned_at", "2019-01-01") == 1


def test_a_mental_model_refused_for_want_of_an_llm_is_not_created(http: httpx.Client, bank_id: str) -> None:
    body = {"id": "weekly", "name": "Weekly", "source_query": "What happened this week?"}
    url = f"/v1/default/banks/{bank_id}/mental-models"
    for _ in range(2):  # the retry gets the same answer, not a 409
        response = http.post(url, json=body)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "LLMNotConfigured"
    assert http.get(f"{url}/weekly").status_code == 404
    nothing_stored(http, bank_id)


# --- item 9: a body that never arrives ------------------------------------------------------------


def _raw_request(url: str, head: bytes, body: bytes, wait: float) -> tuple[float, bytes]:
    """Send a request whose body is shorter than its Content-Length; the answer and when it came."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(head + body)
        started = time.monotonic()
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:  # the server closed the connection
                return time.monotonic() - started, answer
            answer += chunk


def test_a_body_shorter_than_its_content_length_is_408_after_the_timeout(isolated_dsn: str, bank_id: str) -> None:
    from tests.conftest import start_server

    server = start_server(isolated_dsn, {"ENGRAM_BODY_READ_TIMEOUT": "1.5"}, name="body-timeout")
    try:
        head = (f"POST /v1/default/banks/{bank_id}/memories HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n").encode()
        waited, answer = _raw_request(server.url, head, b'{"items": [{"content": "ha', wait=20)
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 408 Request Timeout", answer
        assert 1.4 <= waited < 10, waited
        body = json.loads(rest.partition(b"\r\n\r\n")[2])
        assert body["field"] == "body" and "ENGRAM_BODY_READ_TIMEOUT" in body["detail"], body
        assert "got 26 of the 500 declared bytes" in body["detail"], body
        with server.client() as http:
            assert http.get("/health").status_code == 200
            nothing_stored(http, bank_id)
    finally:
        server.stop()
