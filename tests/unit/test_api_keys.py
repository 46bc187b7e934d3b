"""The `ENGRAM_API_KEYS` format and bank patterns (wildcards `*`, `?`; everything else literal)."""

from __future__ import annotations

import fnmatch
import re

import pytest

from engram.api.auth import ApiKey, BankAccess, bank_pattern_regex, parse_api_keys
from engram.settings import Settings


def test_keys_with_and_without_bank_lists() -> None:
    keys = parse_api_keys(" admin , agent:team-*|solo ,, reader:notes")
    assert keys == [
        ApiKey("admin"),
        ApiKey("agent", BankAccess(("team-*", "solo"))),
        ApiKey("reader", BankAccess(("notes",))),
    ]


def test_the_hindsight_tenant_key_is_one_verbatim_unrestricted_key() -> None:
    assert parse_api_keys(None, "a:b,c") == [ApiKey("a:b,c")]
    assert parse_api_keys("", None) == []


@pytest.mark.parametrize("spec", [":bank", "key:", "key: | ", "a, :x"])
def test_malformed_entries_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="ENGRAM_API_KEYS"):
        parse_api_keys(spec)


def test_settings_read_both_names() -> None:
    settings = Settings.from_env({"ENGRAM_API_KEYS": "k1,k2:b", "HINDSIGHT_API_TENANT_API_KEY": "t"})
    assert (settings.api_keys, settings.tenant_api_key) == ("k1,k2:b", "t")
    assert Settings.from_env({"ENGRAM_MAX_REQUEST_BYTES": "1024"}).max_request_bytes == 1024
    assert Settings.from_env({}).max_request_bytes == 10 * 1024 * 1024


NAMES = ["team-a", "team-", "team", "teamX", "a.b", "axb", "a+b", "aab", "é-ü", "x\ny", "[ab]", "a", "(a)", "a|b",
         "100%", "a_b", "a\\b", "$x", "^x"]
PATTERNS = ["team-*", "a.b", "a+b", "?", "é-*", "x?y", "[ab]", "(a)", "a|b", "100%", "a_b", "a\\b", "$x", "^x", "*"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_match_like_fnmatch_wildcards(pattern: str) -> None:
    # fnmatch's brackets are not supported: '[' is literal here, so compare on an escaped pattern.
    literal_brackets = pattern.replace("[", "[[]")
    for name in NAMES:
        expected = fnmatch.fnmatchcase(name, literal_brackets)
        assert BankAccess((pattern,)).allows(name) is expected, (pattern, name)
        assert bool(re.fullmatch(bank_pattern_regex(pattern), name, re.DOTALL)) is expected
