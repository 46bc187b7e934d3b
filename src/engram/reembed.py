"""`engram reembed`: every stored vector made again with the configured embedding model (memory units,
their sentence vectors, mental models), then the database records that model. One transaction: a
failure leaves the old vectors and the old model in place, never a mix of the two."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engram.retain.facts import embedding_text
from engram.retain.sentences import split_sentences

BATCH = 256


@dataclass
class Reembedded:
    model: str
    previous: str | None
    units: int = 0
    sentences: int = 0
    mental_models: int = 0


def sentence_texts(text: str) -> list[str]:
    """The "Speaker: sentence" texts the offline extractor embeds for a turn of several sentences,
    read back from the stored fact ("Speaker: turn[ | When: …]")."""
    speaker, sep, said = text.split(" | ", 1)[0].partition(": ")
    sentences = split_sentences(said) if sep else []
    return [f"{speaker}: {sentence}" for sentence in sentences] if len(sentences) > 1 else []


def _unit_text(row: Any) -> str:
    if row["fact_type"] == "observation":  # consolidation embeds an observation's text alone
        return row["text"]
    return embedding_text(row["text"], row["happened"], list(row["entity_names"]))


async def _units(conn: Any, embedder: Any, done: Reembedded, progress: Callable[[str], None]) -> None:
    from engram.store import embedding_model as store

    after = None
    while rows := await store.units_after(conn, after, BATCH):
        after = rows[-1]["id"]
        with_sentences = [(row, sentence_texts(row["text"])) for row in rows if row["has_sentences"]]
        sentences = [(row, text) for row, texts in with_sentences for text in texts]
        vectors = await asyncio.to_thread(embedder.embed, [_unit_text(r) for r in rows] + [t for _, t in sentences])
        await store.write_unit_vectors(conn, [r["id"] for r in rows], list(vectors[: len(rows)]))
        if with_sentences:
            await store.replace_sentence_vectors(
                conn, [row["id"] for row, _ in with_sentences], [row["id"] for row, _ in sentences],
                [row["bank_id"] for row, _ in sentences], list(vectors[len(rows):]))
        done.units += len(rows)
        done.sentences += len(sentences)
        progress(f"{done.units:,} memories re-embedded")


async def reembed(pool: Any, model_name: str, progress: Callable[[str], None] = lambda line: None) -> Reembedded:
    from engram.models.embedder import embedder, embedding_model
    from engram.store import embedding_model as store

    model = embedding_model(model_name)
    async with pool.acquire() as conn, conn.transaction():
        done = Reembedded(model.name, await store.recorded_model(conn))
        await _units(conn, embedder(), done, progress)
        models = await store.mental_models(conn)
        if models:  # a standing question, matched against questions: the query side (api/mental_models.py)
            vectors = await asyncio.to_thread(embedder().embed_queries,
                                              [f"{m['name']}: {m['source_query']}" for m in models])
            for row, vector in zip(models, vectors, strict=True):
                await store.write_mental_model_vector(conn, row["bank_id"], row["id"], vector)
        done.mental_models = len(models)
        await store.record_model(conn, model.name, model.dimensions)
    return done
