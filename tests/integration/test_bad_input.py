"""Bad input gets a 4xx that names the field or the limit, never a 500: oversized bodies, too many or
too long retain items, over-long recall queries, characters PostgreSQL cannot store (NUL, lone
surrogates). Hostile or unusual text — SQL fragments, quotes, wildcards, emoji, right-to-left and
combining characters — in tags, entity names, metadata, document ids and bank ids is stored
verbatim and read back exactly."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from engram.retain.prepare import MAX_CONTENT_CHARS, MAX_ITEMS

MAX_REQUEST_BYTES = 10 * 1024 * 1024


def memories(bank: str) -> str:
    return f"/v1/default/banks/{quote(bank, safe='')}/memories"


def refused(response: httpx.Response, status: int, field: str, *words: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["field"] == field, body
    for word in words:
        assert word in body["detail"], body
    return body


# --- sizes ------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_naming_the_limit(http: httpx.Client, bank_id: str) -> None:
    content = "x" * (MAX_REQUEST_BYTES + 1)
    response = http.post(memories(bank_id), content=content, headers={"content-type": "application/json"})
    body = refused(response, 413, "body", str(MAX_REQUEST_BYTES), "ENGRAM_MAX_REQUEST_BYTES")
    assert body["error"] == "PayloadTooLarge"
    assert http.get(f"/v1/default/banks/{bank_id}/config").status_code == 404, "nothing was created"


def test_a_chunked_body_over_the_limit_is_413_too(http: httpx.Client, bank_id: str) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the size is only known while reading
        piece = b" " * (1024 * 1024)
        for _ in range(11):
            yield piece

    response = http.post(memories(bank_id), content=chunks(), headers={"content-type": "application/json"})
    refused(response, 413, "body", str(MAX_REQUEST_BYTES))


def test_the_body_limit_is_a_setting(isolated_dsn: str, bank_id: str) -> None:
    from tests.conftest import start_server

    small = start_server(isolated_dsn, {"ENGRAM_MAX_REQUEST_BYTES": "2000"}, name="small-bodies")
    try:
        with small.client() as http:
            ok = http.post(memories(bank_id), json={"items": [{"content": "Short enough to pass."}]})
            assert ok.status_code == 200, ok.text
            big = http.post(memories(bank_id), json={"items": [{"content": "word " * 500}]})
            refused(big, 413, "body", "2000 bytes")
    finally:
        small.stop()


def test_too_many_retain_items_is_413_naming_the_limit(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": f"Note {i}."} for i in range(MAX_ITEMS + 1)]
    response = http.post(memories(bank_id), json={"items": items})
    refused(response, 413, "items", f"at most {MAX_ITEMS} items", f"got {MAX_ITEMS + 1}")


def test_retain_content_over_the_limit_is_413_naming_the_item(http: httpx.Client, bank_id: str) -> None:
    items = [{"content": "Fine."}, {"content": "a" * (MAX_CONTENT_CHARS + 1)}]
    response = http.post(memories(bank_id), json={"items": items})
    refused(response, 413, "items[1].content", f"longer than {MAX_CONTENT_CHARS} characters")


def test_a_recall_query_over_512_tokens_is_400_naming_query(http: httpx.Client, bank_id: str) -> None:
    http.post(memories(bank_id), json={"items": [{"content": "The kettle is in the left cupboard."}]})
    long_query = "where is the kettle " * 130  # 4 tokens a repetition: 520 tokens
    refused(http.post(f"{memories(bank_id)}/recall", json={"query": long_query}), 400, "query", "512 tokens")
    fits = http.post(f"{memories(bank_id)}/recall", json={"query": "where is the kettle " * 120})
    assert fits.status_code == 200, fits.text


# --- characters PostgreSQL cannot store ---------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"content": "before\u0000after"}, "items[0].content"),
        ({"content": "ok", "context": "a\u0000"}, "items[0].context"),
        ({"content": "ok", "tags": ["fine", "bad\u0000tag"]}, "items[0].tags[1]"),
        ({"content": "ok", "metadata": {"k\u0000": "v"}}, "items[0].metadata.k\u0000"),
        ({"content": "ok", "metadata": {"k": "v\u0000"}}, "items[0].metadata.k"),
        ({"content": "ok", "document_id": "doc\u0000"}, "items[0].document_id"),
        ({"content": "ok", "entities": [{"text": "Ann\u0000"}]}, "items[0].entities[0].text"),
    ],
)
def test_nul_characters_are_400_naming_the_field(http: httpx.Client, bank_id: str, item: dict, field: str) -> None:
    body = refused(http.post(memories(bank_id), json={"items": [item]}), 400, field, "NUL")
    assert body["error"] == "InvalidInput"
    assert http.get(f"/v1/default/banks/{bank_id}/config").status_code == 404, "nothing was stored"


def test_nul_in_other_places_is_400_too(http: httpx.Client, bank_id: str) -> None:
    refused(http.post(f"{memories(bank_id)}/recall", json={"query": "a\u0000b"}), 400, "query", "NUL")
    refused(http.put(f"/v1/default/banks/{bank_id}", json={"name": "\u0000"}), 400, "name", "NUL")
    refused(http.get("/v1/default/banks/bank%00id/memories/list"), 400, "bank_id", "NUL")
    refused(http.get(f"{memories(bank_id)}/list", params={"q": "a\u0000"}), 400, "q", "NUL")
    refused(http.patch(f"/v1/default/banks/{bank_id}/config", json={"updates": {"retain_mission": "\u0000"}}),
            400, "updates.retain_mission", "NUL")


def test_lone_surrogates_are_400_naming_the_field(http: httpx.Client, bank_id: str) -> None:
    raw = b'{"items": [{"content": "ok", "tags": ["\\ud800"]}]}'
    response = http.post(memories(bank_id), content=raw, headers={"content-type": "application/json"})
    refused(response, 400, "items[0].tags[0]", "surrogate")
    # A proper pair written as escapes is just an emoji.
    pair = b'{"items": [{"content": "Party time \\ud83c\\udf89 at the office.", "document_id": "pair"}]}'
    response = http.post(memories(bank_id), content=pair, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    document = http.get(f"/v1/default/banks/{bank_id}/documents/pair").json()
    assert document["original_text"] == "Party time \U0001f389 at the office."


def test_an_escaped_backslash_before_u0000_is_plain_text(http: httpx.Client, bank_id: str) -> None:
    raw = b'{"items": [{"content": "The path is C:\\\\u0000 on the old disk.", "document_id": "path"}]}'
    response = http.post(memories(bank_id), content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    document = http.get(f"/v1/default/banks/{bank_id}/documents/path").json()
    assert document["original_text"] == "The path is C:\\u0000 on the old disk."


# --- hostile and unusual text, stored verbatim ---------------------------------------------------

STRANGE = [
    "'; DROP TABLE memory_units; --",
    "\" OR \"1\"=\"1",
    "Robert'); DELETE FROM banks WHERE ('1'='1",
    "100% _wild_ [card] \\ backslash",
    "$1 $$ ::text ~* E'\\x00'",
    "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 🎉",
    "עברית ومرحبا RTL \u202e mixed",
    "combining e\u0301 vs é, zero\u200bwidth",
    "中文 日本語 한국어",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 astral",
    "<script>alert(1)</script> &amp;",
    "{\"json\": [1, 2]} and {{braces}}",
]


def test_strange_text_round_trips_through_tags_metadata_entities_and_document_ids(
    http: httpx.Client, bank_id: str
) -> None:
    for index, strange in enumerate(STRANGE):
        document_id = f"doc {index} {strange}"
        item = {
            "content": f"Sentence number {index} mentions the harbour master.",
            "document_id": document_id,
            "tags": [strange, f"plain-{index}"],
            "metadata": {strange: strange, "index": str(index)},
            "context": strange,
            "entities": [{"text": strange}],
        }
        response = http.post(memories(bank_id), json={"items": [item]})
        assert response.status_code == 200, (strange, response.text)

        listed = http.get(f"{memories(bank_id)}/list", params={"document_id": document_id}).json()["items"]
        assert len(listed) == 1, (strange, listed)
        (fact,) = listed
        assert fact["document_id"] == document_id
        assert fact["tags"] == [strange, f"plain-{index}"]
        assert fact["metadata"] == {strange: strange, "index": str(index)}
        assert fact["context"] == strange
        detail = http.get(f"{memories(bank_id)}/{fact['id']}").json()
        assert strange in detail["entities"]

        if "/" not in document_id:  # a path is decoded before routing: '/' cannot be in a path id
            document = http.get(f"/v1/default/banks/{bank_id}/documents/{quote(document_id, safe='')}")
            assert document.status_code == 200, (strange, document.text)
            assert document.json()["id"] == document_id
        listed_docs = http.get(f"/v1/default/banks/{bank_id}/documents", params={"q": strange}).json()["items"]
        assert document_id in [d["id"] for d in listed_docs]

        by_tag = http.get(f"{memories(bank_id)}/list", params={"tags": strange, "tags_match": "all_strict"}).json()
        assert [f["document_id"] for f in by_tag["items"]] == [document_id], strange

    tags = {row["tag"] for row in http.get(f"/v1/default/banks/{bank_id}/tags", params={"limit": 1000}).json()["items"]}
    assert set(STRANGE) <= tags
    entities = http.get(f"/v1/default/banks/{bank_id}/entities", params={"limit": 1000}).json()["items"]
    names = {entity["canonical_name"] for entity in entities}
    assert set(STRANGE) <= names


def test_searches_take_sql_wildcards_literally(http: httpx.Client, bank_id: str) -> None:
    texts = ["Discount of 100% on _all_ items.", "Discount of 1000 on bulk items.", "A back\\slash path."]
    tags = ["100%", "1000", "under_score", "underXscore", "user:alice", "user:bob", "role-admin", "a\\b"]
    items = [{"content": text, "document_id": f"doc-{i}", "tags": tags} for i, text in enumerate(texts)]
    assert http.post(memories(bank_id), json={"items": items}).status_code == 200

    def tag_search(q: str) -> list[str]:
        found = http.get(f"/v1/default/banks/{bank_id}/tags", params={"q": q}).json()["items"]
        return sorted(row["tag"] for row in found)

    assert tag_search("100%") == ["100%"]
    assert tag_search("under_") == ["under_score"]
    assert tag_search("a\\b") == ["a\\b"]
    assert tag_search("user:*") == ["user:alice", "user:bob"]  # Hindsight's '*' wildcard for tags
    assert tag_search("*-ADMIN") == ["role-admin"]

    def text_search(q: str) -> list[str]:
        found = http.get(f"{memories(bank_id)}/list", params={"q": q}).json()["items"]
        return sorted(item["text"] for item in found)

    assert text_search("100%") == ["Discount of 100% on _all_ items."]
    assert text_search("_all_") == ["Discount of 100% on _all_ items."]
    assert text_search("k\\s") == ["A back\\slash path."]
    documents = http.get(f"/v1/default/banks/{bank_id}/documents", params={"q": "100%"}).json()["items"]
    assert [d["id"] for d in documents] == ["doc-0"]
    banks = http.get("/v1/default/banks", params={"q": "%"}).json()["banks"]
    assert all("%" in b["bank_id"] or "%" in (b["name"] or "") for b in banks)


@pytest.mark.parametrize("strange", [text for text in STRANGE if "/" not in text])
def test_strange_bank_ids_are_stored_verbatim_and_stay_separate(http: httpx.Client, strange: str) -> None:
    bank = f"bank {strange}"
    response = http.post(memories(bank), json={"items": [{"content": "The lantern is blue."}]})
    assert response.status_code == 200, response.text
    assert response.json()["bank_id"] == bank
    profile = http.get(f"/v1/default/banks/{quote(bank, safe='')}/config").json()
    assert profile["bank_id"] == bank
    listed = http.get("/v1/default/banks", params={"q": strange, "limit": 1000}).json()["banks"]
    assert bank in [b["bank_id"] for b in listed]
    recall = http.post(f"{memories(bank)}/recall", json={"query": "What colour is the lantern?"}).json()
    assert [r["text"] for r in recall["results"]] == ["The lantern is blue."]
    assert http.delete(f"/v1/default/banks/{quote(bank, safe='')}").status_code == 200
    assert http.get(f"/v1/default/banks/{quote(bank, safe='')}/config").status_code == 404


def test_a_bank_id_cannot_hold_a_slash(http: httpx.Client) -> None:
    # The path is decoded before routing, so %2F splits the bank id: the route does not exist.
    response = http.post("/v1/default/banks/a%2Fb/memories", json={"items": [{"content": "Nope."}]})
    assert response.status_code == 404


def test_sql_in_a_recall_query_is_only_text(http: httpx.Client, bank_id: str) -> None:
    http.post(memories(bank_id), json={"items": [{"content": "The orchard has forty apple trees."}]})
    for query in ("'; DROP TABLE memory_units; --", "apple' OR '1'='1", "%", "_", "\\", "*", "!!!", "& | !"):
        response = http.post(f"{memories(bank_id)}/recall", json={"query": query})
        assert response.status_code == 200, (query, response.text)
    after = http.post(f"{memories(bank_id)}/recall", json={"query": "How many apple trees?"}).json()
    assert "forty apple trees" in after["results"][0]["text"]
