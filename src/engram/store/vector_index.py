"""The distance a statement orders by when the HNSW indexes may serve it.

The indexes of memory_units and memory_unit_sentences hold half-precision copies of the vectors
(migration 025), so PostgreSQL uses one only for a statement that orders by that copy's distance,
spelt as the index spells it. Ordered by the full-precision distance, the same statement computes
every distance and sorts: still right, never fast at scale, and nothing would fail to show it.
Statements report the full-precision distance and order their final results by it; the half-precision
one only chooses the candidates."""

from __future__ import annotations

# The vector columns' type is vector(384) (migration 001); the index expression names the dimensions.
VECTOR_DIMENSIONS = 384


def indexed_distance(column: str, query: str) -> str:
    """SQL for the cosine distance between `column` (a vector column of an indexed table) and `query`
    (a vector expression) as the HNSW indexes compute it."""
    return f"({column})::halfvec({VECTOR_DIMENSIONS}) <=> ({query})::halfvec({VECTOR_DIMENSIONS})"
