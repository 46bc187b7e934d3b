"""The LLM settings checked before the server starts: unknown names refused with a suggestion, a
missing model refused, a hosted provider with no key warned about, slot counts in range."""

from __future__ import annotations

import pytest

from engram.llm import check_settings
from engram.settings import Settings


def test_an_unknown_provider_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ValueError, match=r"unknown LLM provider 'olama' \(did you mean 'ollama'\?\)"):
        check_settings(Settings(llm_provider="olama"))


def test_aliases_are_accepted_and_a_model_is_required_where_there_is_no_default() -> None:
    assert check_settings(Settings(llm_provider="llama.cpp")) == []
    with pytest.raises(ValueError, match="'ollama' needs a model name: set ENGRAM_LLM_MODEL"):
        check_settings(Settings(llm_provider="ollama"))


def test_a_hosted_provider_without_a_key_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_settings(Settings(llm_provider="openai")) == [
        "LLM provider 'openai' has no API key: set ENGRAM_LLM_API_KEY, or its calls will be refused"]
    assert check_settings(Settings(llm_provider="openai", llm_api_key="sk-x")) == []
    assert check_settings(Settings(llm_provider="ollama", llm_model="llama3")) == [], "a local server needs no key"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-the-sdk")
    assert check_settings(Settings(llm_provider="claude", llm_model="claude-x")) == []
    assert Settings.from_env({"ENGRAM_LLM_API_KEY": "sk-x"}).llm_provider == "openai", "a key alone selects openai"


def test_slot_counts_take_hindsights_names_and_refuse_none() -> None:
    assert (Settings.from_env({}).llm_max_concurrent, Settings.from_env({}).worker_max_slots) == (32, 0)
    assert Settings.from_env({"HINDSIGHT_API_LLM_MAX_CONCURRENT": "8"}).llm_max_concurrent == 8
    assert Settings.from_env({"HINDSIGHT_API_WORKER_MAX_SLOTS": "3"}).worker_max_slots == 3
    with pytest.raises(ValueError, match=r"ENGRAM_LLM_MAX_CONCURRENT=0 is not valid: expected at least 1"):
        Settings.from_env({"ENGRAM_LLM_MAX_CONCURRENT": "0"})
    with pytest.raises(ValueError, match=r"ENGRAM_WORKER_MAX_SLOTS=-1 is not valid: expected 0 \(automatic\)"):
        Settings.from_env({"ENGRAM_WORKER_MAX_SLOTS": "-1"})


def test_a_worker_runs_ten_operations_at_once_with_an_llm_and_two_without() -> None:
    """Operations with an LLM mostly wait for it; without one they only share the cores."""
    from types import SimpleNamespace

    from engram.worker.runner import Worker

    def slots(llm: object, **settings: int) -> int:
        return Worker(SimpleNamespace(llm=llm, settings=Settings(**settings))).concurrency  # type: ignore[arg-type]

    assert (slots(object()), slots(None)) == (10, 2)
    assert (slots(object(), worker_max_slots=3), slots(None, worker_max_slots=3)) == (3, 3)
