"""How queries read the consolidation status table (migration 023): one row per memory unit, `c`
beside the unit's `m`. The writes (marks and resets) are in engram.store.observations."""

from __future__ import annotations

# A unit's status under the names the API gives it, from `c` joined with STATUS_JOIN.
STATUS_COLUMNS = "c.consolidated_at, c.failed_at AS consolidation_failed_at, c.error AS consolidation_error"
STATUS_JOIN = "LEFT JOIN consolidation_status c ON c.unit_id = m.id"


def waiting_facts(bank: str) -> str:
    """`FROM … WHERE …` of the bank's facts waiting for consolidation (`m`, their status `c`), read from
    the pending partial index; `bank` is the bank id's parameter reference."""
    return (
        "consolidation_status c JOIN memory_units m ON m.id = c.unit_id"
        f" WHERE c.bank_id = {bank} AND c.consolidated_at IS NULL AND c.failed_at IS NULL"
        " AND m.fact_type IN ('world', 'experience')"
    )
