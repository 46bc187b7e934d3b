"""Hostile values in every body field and query parameter of every operation of the live server's own
OpenAPI document (`GET /openapi.json`): lone surrogates (escaped and as raw UTF-8 bytes), NaN and
Infinity, numbers past 64 bits and negative ones, unknown enum values, deep nesting, edge dates and
time-zone offsets. No answer may be a 5xx, and every 4xx that refuses the input (400, 408, 413,
422) must name the field it refused.

Deterministic and bounded: one bank, a valid request built from each operation's schema, then one
request per (field, bad value) with the rest of the request left valid; fields are walked three
levels deep. The failures are collected and reported together, each with the request that caused it."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import ARTIFACTS, RunningServer

MARK = "\u0001hostile\u0001"  # stands in for a bad value until the body is serialised
FIELD_DEPTH = 3
# Refusals that are about the request's input and so must say which field they refused.
INPUT_REFUSALS = (400, 408, 413, 422)


@dataclass(frozen=True)
class Bad:
    name: str
    raw: bytes  # the JSON text put in place of the value
    query: str  # the same hostile value as a percent-encoded query value


NUMBERS = [
    Bad("NaN", b"NaN", "NaN"),
    Bad("Infinity", b"Infinity", "Infinity"),
    Bad("-Infinity", b"-Infinity", "-Infinity"),
    Bad("1e400", b"1e400", "1e400"),
    Bad("2^70", str(2**70).encode(), str(2**70)),
    Bad("-2^70", str(-(2**70)).encode(), str(-(2**70))),
    Bad("2^63", str(2**63).encode(), str(2**63)),
    Bad("2^31", str(2**31).encode(), str(2**31)),
    Bad("-1", b"-1", "-1"),
]
TEXT = [
    Bad("escaped surrogate", b'"a\\ud800b"', "a%5Cud800b"),
    Bad("raw surrogate", b'"a\xed\xa0\x80b"', "a%ED%A0%80b"),
    Bad("escaped NUL", b'"a\\u0000b"', "a%00b"),
    Bad("deep nesting", b"[" * 40 + b"]" * 40, "%5B" * 200 + "%5D" * 200),
]
DATES = [
    Bad("year 1", b'"0001-01-01T00:00:00Z"', "0001-01-01T00:00:00Z"),
    Bad("year 9999", b'"9999-12-31T23:59:59.999999Z"', "9999-12-31T23:59:59.999999Z"),
    Bad("offset +24:00", b'"2024-05-08T13:56:00+24:00"', "2024-05-08T13:56:00%2B24:00"),
    Bad("offset -25:00", b'"2024-05-08T13:56:00-25:00"', "2024-05-08T13:56:00-25:00"),
]
UNKNOWN_ENUM = Bad("unknown enum value", b'"no-such-value"', "no-such-value")


# --- a valid request from a schema --------------------------------------------------------------


class Schema:
    def __init__(self, document: dict[str, Any]) -> None:
        self.components = document.get("components", {}).get("schemas", {})

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.components[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def options(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives of a schema (itself when it has none)."""
        schema = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return [self.resolve(s) for s in schema[key] if self.resolve(s).get("type") != "null"]
        if "allOf" in schema:
            return [self.resolve(schema["allOf"][0])]
        return [schema]

    def example(self, schema: dict[str, Any], depth: int = 0) -> Any:
        """A small valid value of the schema."""
        options = self.options(schema)
        if not options:
            return None
        schema = options[0]
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type")
        if kind == "object" or "properties" in schema:
            properties = schema.get("properties", {})
            return {name: self.example(properties[name], depth + 1) for name in schema.get("required", [])
                    if depth < 6}
        if kind == "array":
            return [self.example(schema.get("items", {}), depth + 1)] if schema.get("minItems") else []
        if kind == "string":
            if schema.get("format") == "date-time":
                return "2024-05-08T13:56:00Z"
            return "hostile"
        if kind == "integer":
            return max(schema.get("minimum", 1), 1)
        if kind == "number":
            return 1.0
        if kind == "boolean":
            return False
        return "hostile"

    def fields(self, schema: dict[str, Any], path: tuple[Any, ...] = (), depth: int = 0) -> Iterator[
            tuple[tuple[Any, ...], dict[str, Any]]]:
        """Every (path, schema) of a body, objects' properties and arrays' first items, `FIELD_DEPTH` deep."""
        for option in self.options(schema):
            if path:
                yield path, option
            if depth >= FIELD_DEPTH:
                continue
            if "properties" in option:
                for name, child in option["properties"].items():
                    yield from self.fields(child, (*path, name), depth + 1)
            elif isinstance(option.get("additionalProperties"), dict):
                yield from self.fields(option["additionalProperties"], (*path, "k"), depth + 1)
            elif option.get("type") == "array" and "items" in option:
                yield from self.fields(option["items"], (*path, 0), depth + 1)


def bad_values(schema: Schema, field: dict[str, Any], name: str) -> list[Bad]:
    values = [*NUMBERS, *TEXT]
    if any("enum" in option for option in schema.options(field)):
        values.append(UNKNOWN_ENUM)
    looks_like_time = any(o.get("format") == "date-time" for o in schema.options(field))
    if looks_like_time or re.search(r"date|time|start|end", str(name)):
        values.extend(DATES)
    return values


def with_mark(schema: Schema, body: Any, body_schema: dict[str, Any], path: tuple[Any, ...]) -> Any:
    """A copy of `body` with MARK at `path`, the containers on the way made from the schema."""
    body = json.loads(json.dumps(body))
    if not path:
        return MARK
    node_schema = body_schema
    node = body
    for step, next_step in zip(path, (*path[1:], None), strict=True):
        options = schema.options(node_schema)
        child_schema: dict[str, Any] = {}
        for option in options:
            if isinstance(step, int) and "items" in option:
                child_schema = option["items"]
            elif "properties" in option and step in option["properties"]:
                child_schema = option["properties"][step]
            elif isinstance(option.get("additionalProperties"), dict):
                child_schema = option["additionalProperties"]
        if next_step is None:
            if isinstance(node, list):
                node[:] = [MARK]
            else:
                node[step] = MARK
            return body
        if isinstance(node, list):
            if not node or not isinstance(node[0], dict | list):
                node[:] = [schema.example(child_schema) if not isinstance(next_step, int) else []]
            node = node[0]
        else:
            current = node.get(step)
            if not isinstance(current, dict | list):
                current = [] if isinstance(next_step, int) else (schema.example(child_schema) or {})
                if not isinstance(current, dict | list):
                    current = {}
                node[step] = current
            node = current
        node_schema = child_schema
    return body


def field_name(path: tuple[Any, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


# --- the walk -------------------------------------------------------------------------------------


@dataclass
class Operation:
    method: str
    path: str
    spec: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.method.upper()} {self.path}"


def operations(document: dict[str, Any]) -> list[Operation]:
    """Every operation; deletes last (the bank's own delete at the very end), so the others find
    the objects they name."""
    found = [Operation(m, p, op) for p, ops in document["paths"].items() for m, op in ops.items()]
    return sorted(found, key=lambda o: (o.method == "delete", o.path == "/v1/default/banks/{bank_id}"))


@dataclass
class Walk:
    http: httpx.Client
    schema: Schema
    ids: dict[str, str]
    failures: list[str]
    sent: int = 0

    def send(self, method: str, url: str, what: str, **options: Any) -> None:
        """One request and its verdict. A dropped connection is a failure too; the request is sent
        once more on a new connection so one failure does not hide the next case."""
        self.sent += 1
        try:
            response = self.http.request(method, url, **options)
        except httpx.TransportError as exc:
            self.failures.append(f"connection failed ({type(exc).__name__}) on {what}")
            response = self.http.request(method, url, **options)
        self.check(response, what)

    def check(self, response: httpx.Response, what: str) -> None:
        status = response.status_code
        if status >= 500:
            self.failures.append(f"{status} from {what}: {response.text[:300]}")
            return
        if status not in INPUT_REFUSALS:
            return
        try:
            body = response.json()
        except ValueError:
            self.failures.append(f"{status} without a JSON body from {what}: {response.text[:300]}")
            return
        if body.get("error") == "LLMNotConfigured":  # names the setting to configure, not a field
            return
        if not (isinstance(body, dict) and body.get("field")):
            self.failures.append(f"{status} naming no field from {what}: {response.text[:300]}")

    def url(self, operation: Operation) -> str:
        return re.sub(r"{(\w+)}", lambda m: self.ids.get(m.group(1), "hostile-none"), operation.path)

    def body_cases(self, operation: Operation) -> None:
        content = operation.spec.get("requestBody", {}).get("content", {}).get("application/json")
        if content is None:
            return
        body_schema = content.get("schema", {})
        base = self.schema.example(body_schema)
        seen: set[tuple[Any, ...]] = set()
        for path, field in self.schema.fields(body_schema):
            if path in seen:
                continue
            seen.add(path)
            marked = json.dumps(with_mark(self.schema, base, body_schema, path)).encode()
            placeholder = json.dumps(MARK).encode()
            for bad in bad_values(self.schema, field, path[-1]):
                raw = marked.replace(placeholder, bad.raw)
                what = f"{operation.label} body {field_name(path)} = {bad.name}: {raw[:200]!r}"
                self.send(operation.method, self.url(operation), what, content=raw,
                          headers={"content-type": "application/json"})

    def query_cases(self, operation: Operation) -> None:
        for parameter in operation.spec.get("parameters", []):
            if parameter["in"] != "query":
                continue
            name = parameter["name"]
            for bad in bad_values(self.schema, parameter.get("schema", {}), name):
                url = f"{self.url(operation)}?{name}={bad.query}"
                self.send(operation.method, url, f"{operation.label} query {name} = {bad.name}: {url}")


def known_ids(http: httpx.Client, bank: str) -> dict[str, str]:
    """Real ids of the bank's objects, so routes that look one up get past the lookup."""
    base = f"/v1/default/banks/{bank}"
    item = {"content": "The harbour master of Port Alba keeps the tide tables.", "document_id": "hostile-doc",
            "tags": ["t"], "entities": [{"text": "Port Alba"}]}
    assert http.post(f"{base}/memories", json={"items": [item]}).status_code == 200
    memory = http.get(f"{base}/memories/list").json()["items"][0]
    entity = http.get(f"{base}/entities").json()["items"][0]
    directive = http.post(f"{base}/directives", json={"name": "d", "content": "Be brief."}).json()
    queued = http.post(f"{base}/memories", json={"items": [{"content": "Later."}], "async": True}).json()
    return {"bank_id": bank, "memory_id": memory["id"], "document_id": "hostile-doc", "chunk_id": memory["chunk_id"],
            "entity_id": entity["id"], "directive_id": directive["id"], "operation_id": queued["operation_id"],
            "model_id": "hostile-model"}


@pytest.fixture(scope="module")
def walk(server: RunningServer) -> Iterator[Walk]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        bank = f"hostile-{uuid.uuid4().hex[:8]}"
        document = http.get("/openapi.json").json()
        yield Walk(http, Schema(document), known_ids(http, bank), [])


def test_no_hostile_value_gets_a_5xx_or_a_refusal_naming_no_field(server: RunningServer, walk: Walk) -> None:
    document = walk.http.get("/openapi.json").json()
    ops = operations(document)
    assert len(ops) > 50, "the whole API is walked"
    for operation in ops:
        walk.body_cases(operation)
        walk.query_cases(operation)
    print(f"\nhostile input: {walk.sent} requests to {len(ops)} operations")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "hostile-input-failures.txt").write_text("\n".join(walk.failures) + "\n")
    assert walk.sent > 1000
    assert not walk.failures, f"{len(walk.failures)} of {walk.sent} requests failed:\n" + "\n".join(
        walk.failures[:40])
    assert walk.http.get("/health").status_code == 200
