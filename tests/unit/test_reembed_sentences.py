"""`engram reembed` reads a turn's sentences back from the stored fact exactly as the offline extractor
made them, so the sentence vectors it writes are the ones a fresh retain would."""

from __future__ import annotations

from datetime import UTC, datetime

from engram.reembed import sentence_texts
from engram.retain.offline import extract_offline

CHUNK = """Caroline: I went to the LGBTQ support group yesterday. It was so powerful! The stories moved me.
Melanie: That's great.
Jonas: Ich habe gestern ein Fahrrad gekauft. Es ist blau und sehr schnell, wirklich.
Mel: We went to Rome last May; it rained. Still lovely."""


def test_sentences_read_back_equal_the_extractors() -> None:
    facts = extract_offline(CHUNK, said_at=datetime(2023, 5, 8, tzinfo=UTC))
    assert sum(1 for f in facts if f.sentences) == 2
    for fact in facts:
        assert sentence_texts(fact.stored_text()) == fact.sentences, fact.stored_text()
