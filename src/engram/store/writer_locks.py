"""The advisory locks that keep a bank's writers apart, all held until their transaction ends.

A retain locks the documents it writes and the entity names it may create, so two retains of one
document, or two creating one entity, take turns. Each such lock statement first takes the bank's
writers lock *shared*, which costs nothing while no import runs. An import holds that lock
*exclusively* instead, for its whole transaction: one lock, however many documents and names it
writes. One lock per document and per name, held to the end of an import's single transaction, filled
PostgreSQL's lock table (~13,000 locks at the default `max_locks_per_transaction`) and failed the
import with "out of shared memory". A retain's transaction takes the writers lock shared first of
all, only if it can (`writing_to_bank`): while an import holds it, the retain waits outside any
transaction, and a worker does not claim it (`bank_writers_free` in `operations.claim_next`).

Every other write to a bank's memories (deleting or editing documents and facts, clearing
observations, consolidating) enters the same way. Begun beside an import, it waited for rows the
import had changed, holding a pooled connection, and could deadlock it: a document delete waiting on
an entity the import had recounted held the facts the import was linking to, and PostgreSQL ended
the import, minutes of work, as the deadlock's victim. A write that deletes or changes what the bank
holds also runs alone among the bank's writes (the changes lock, `_entry`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from engram.errors import BankBusy, ClaimLost
from engram.store.missing_bank import MISSING_BANK
from engram.store.tx import Conn, transaction


def _writers_key(bank_sql: str) -> str:
    """The writers lock's key: the bank id hashed with a seed no other lock of Engram's uses, so it
    never meets a document's or a name's key."""
    return f"hashtextextended({bank_sql}, 2)"


_BANK_WRITERS_KEY = _writers_key("$1")


def _after_bank_writers(keys: str) -> str:
    """A statement taking the bank's writers lock (shared, row 0), then exclusively the keys that the
    rows `(n, k)` of `keys` give, in their order."""
    return (
        "SELECT count(CASE WHEN s.n = 0 THEN pg_advisory_xact_lock_shared(s.k) ELSE pg_advisory_xact_lock(s.k) END)"
        f" FROM (SELECT 0::bigint AS n, {_BANK_WRITERS_KEY} AS k UNION ALL {keys} ORDER BY 1, 2) AS s"
    )


_LOCK_DOCUMENTS = _after_bank_writers(
    "SELECT n, hashtextextended($1 || '/' || d, 0) FROM unnest($2::text[]) WITH ORDINALITY AS u(d, n)")
_LOCK_NAMES = _after_bank_writers(
    "SELECT DISTINCT 1, hashtextextended('entity:' || $1 || ':' || name, 0) FROM unnest($2::text[]) AS name")


async def lock_documents(conn: Any, bank_id: str, document_ids: list[str]) -> None:
    """The bank's writers lock (shared), then every document's lock in the order given (the one-by-one
    path's order: sorted ids)."""
    await conn.execute(_LOCK_DOCUMENTS, bank_id, document_ids)


async def lock_names(conn: Any, bank_id: str, keys: list[str]) -> None:
    """The bank's writers lock (shared), then the lock of each (bank, lower-cased entity name).

    Names are not unique (two people may share one), so concurrent retains converge on one entity by
    resolving a name one at a time: the second sees the first's entity and scores it like any other.
    Keys are taken in sorted order, so two retains never wait on each other in a cycle."""
    if not keys:
        return
    await conn.execute(_LOCK_NAMES, bank_id, sorted(set(keys)))


def bank_writers_free(bank_sql: str) -> str:
    """SQL that is true when no import holds the writers lock of the bank `bank_sql` names: it takes
    the lock shared if it can, to the end of the transaction (at once in an autocommit statement)."""
    return f"pg_try_advisory_xact_lock_shared({_writers_key(bank_sql)})"


def _changes_key(bank_sql: str) -> str:
    """The key of the bank's changes lock (`_entry`), seeded apart from every other lock's."""
    return f"hashtextextended({bank_sql}, 3)"


# What a write's first statement found (`_entry`).
IMPORT_HOLDS_BANK, ENTERED, CHANGES_BUSY = 0, 1, 2


@dataclass(frozen=True)
class Claim:
    """The queued operation a worker runs a write for, and the worker that claimed it (`check_claim`)."""

    operation_id: uuid.UUID
    worker_id: str


_CLAIM_HELD = ("SELECT EXISTS (SELECT 1 FROM async_operations WHERE id = $1 AND worker_id = $2"
               " AND status = 'processing')")


async def check_claim(conn: Any, claim: Claim | None) -> None:
    """Raise ClaimLost unless the worker still holds the operation it writes for (nothing for a write
    with no `claim`). A statement of its own, run once the bank's locks are held, so its snapshot is
    taken after any wait for them: a check inside the statement that waited read the operation as it
    was when the wait began (a row lock does not help: a worker's claim only updates the row, which
    a `FOR KEY SHARE` lets through unchecked, and a stronger lock would hold the progress reports up).

    A bank's delete removes its operations, those being run included: a queued retain claimed before
    the delete and writing after it made the deleted bank again, holding what the delete was asked
    to remove. A worker whose lease ran out while another took the operation over wrote it a second
    time."""
    if claim is not None and not await conn.fetchval(_CLAIM_HELD, claim.operation_id, claim.worker_id):
        raise ClaimLost(claim)


@functools.cache
def _entry(make_bank: bool, alone: bool, wait: bool) -> str:
    """The first statement of a write's transaction. `IMPORT_HOLDS_BANK`, with nothing done, while an
    import holds the bank's writers lock; else that lock shared, then the bank's changes lock, then
    the bank made if missing (`make_bank`). The changes lock is shared by writes that only add new
    documents, exclusive (`alone`) for one that deletes or changes what the bank holds (deleting the
    bank included), which waits for the writes under way and goes alone. Beside each other, such
    writes deadlocked: a delete held the facts it removed and waited for an entity a retain had
    updated, while the retain waited to link a new fact to a removed one (in 12 threads writing to one
    bank, about half the writes failed so, each after PostgreSQL's 1 s deadlock timeout). Without
    `wait`, a changes lock that is not free at once is not taken: `CHANGES_BUSY`, nothing done.

    The bank is looked for once the changes lock is taken, and its row locked as the documents' key
    will lock it: a retain that waited for the bank's delete then sees the row gone (the lock reads
    the newest version, where the statement's snapshot still had the bank) and makes the bank again,
    instead of failing on the key of its first document."""
    mode = "" if alone else "_shared"
    take = (f"pg_advisory_xact_lock{mode}({_changes_key('$1')}) IS NOT NULL" if wait
            else f"pg_try_advisory_xact_lock{mode}({_changes_key('$1')})")
    # `c.taken` inside the subquery ties it to the row of `changes`, so it runs after the lock is taken
    # (uncorrelated, PostgreSQL would evaluate it once, before).
    made = (", made AS (INSERT INTO banks (bank_id, name) SELECT $1, $1 FROM changes c"
            " WHERE c.taken AND NOT EXISTS (SELECT 1 FROM banks b WHERE b.bank_id = $1 AND c.taken FOR KEY SHARE)"
            " ON CONFLICT (bank_id) DO NOTHING)") if make_bank else ""
    return (f"WITH free AS MATERIALIZED (SELECT {bank_writers_free('$1')} AS ok),"
            f" changes AS MATERIALIZED (SELECT {take} AS taken FROM free WHERE ok){made}"
            f" SELECT CASE WHEN NOT (SELECT ok FROM free) THEN {IMPORT_HOLDS_BANK}"
            f" WHEN (SELECT taken FROM changes) THEN {ENTERED} ELSE {CHANGES_BUSY} END")


async def enter_bank(conn: Any, bank_id: str, *, make_bank: bool, alone: bool, wait: bool) -> int:
    """Run a write's first statement (`_entry`) in `conn`'s transaction; what it found."""
    return await conn.fetchval(_entry(make_bank, alone, wait), bank_id)


# The bank made if missing, unless an import holds it (the lock is let go with the statement's transaction).
_BANK_TO_QUEUE_INTO = MISSING_BANK.format(and_also=f"AND {bank_writers_free('$1')}")


async def ensure_bank_to_queue_into(conn: Conn, bank_id: str) -> None:
    """Make the bank a retain is queued into if missing, except while an import holds it: a restore
    creating the bank has inserted its row uncommitted, and an insert beside it waited for the whole
    restore, holding a pooled connection. The retain queued then runs after the import, into the
    bank it made (or into one the retain makes, if the import failed)."""
    await conn.execute(_BANK_TO_QUEUE_INTO, bank_id)


# A bank's row once it exists, made if missing unless an import holds the bank: false only while a
# restore is creating it (autocommit: the lock is let go at once).
_BANK_READY = f"""WITH free AS MATERIALIZED (SELECT {bank_writers_free('$1')} AS ok),
    made AS ({MISSING_BANK.format(and_also="AND (SELECT ok FROM free)")} RETURNING 1)
SELECT EXISTS (SELECT 1 FROM banks WHERE bank_id = $1) OR EXISTS (SELECT 1 FROM made)"""


async def ensure_bank_after_any_restore(pool: Any, bank_id: str, import_wait: float | None, undone: str) -> None:
    """Make the bank if missing, for rows that need its row (a directive, a mental model, a template's
    config). While a restore is creating the bank, its row is inserted uncommitted and an insert
    beside it waited for the whole restore, holding a connection: this waits without one
    (`wait_for_bank_writers`, BankBusy saying nothing was `undone` past `import_wait` seconds) and
    looks again. A bank that exists, even one an import merges into, goes on at once."""
    while not await pool.fetchval(_BANK_READY, bank_id):
        await wait_for_bank_writers(pool, bank_id, import_wait, undone)


@asynccontextmanager
async def writing_to_bank(
    pool: Any, bank_id: str, import_wait: float | None, *, make_bank: bool = True, alone: bool = True,
    undone: str = "retained", claim: Claim | None = None, slots: asyncio.Semaphore | None = None,
) -> AsyncIterator[Conn]:
    """A transaction writing to the bank's memories, begun once no import holds the bank; for a retain
    (`make_bank`), with the bank made if missing. Unless it only adds new documents (`alone` false),
    it runs alone among the bank's writes (`_entry`). While an import holds the bank, the writer waits
    without a connection (`wait_for_bank_writers`, up to `import_wait` seconds, then BankBusy saying
    nothing was `undone`) and begins again: waiting inside its transaction, it held a pooled
    connection (and a worker slot) for the whole import, so twenty of them took every connection of
    the server. The entry is the transaction's first statement, so a write pays no extra round trip
    for it.

    The changes lock is taken at once if it is free. If not, the writer ends its transaction and
    queues in this process behind the bank's other writers waiting for it (`_changes_queue`): only the
    first waits in PostgreSQL, on a connection. Each waiting on its own connection, thirty edits of one
    bank held back by a long retain took every pooled connection, and recalls of other banks waited
    seconds for one. The one waiting in PostgreSQL keeps the lock's queue fair: a write arriving
    meanwhile cannot take the lock ahead of it.

    A write for a queued operation (`claim`) raises ClaimLost, with nothing written (the bank not made
    either), once its worker no longer holds the operation (`check_claim`).

    A write given `slots` (retains: `retain_slots`) holds one while it writes. It takes one before its
    transaction, and lets it go whenever it waits for the bank: a retain waiting for an import or for
    the changes lock while holding a slot would hold up every other bank's retains. The one waiting
    in PostgreSQL takes its slot once it holds the lock; it holds none of the locks a slot's holder
    may wait for (the names', the documents', the rows'), so the wait cannot close a cycle."""
    wait = False
    while True:
        async with contextlib.AsyncExitStack() as held:
            queued = await held.enter_async_context(_changes_queue(bank_id) if wait else _no_queue())
            if slots is not None and not wait:
                await held.enter_async_context(slots)
            conn = await held.enter_async_context(transaction(pool))
            found = await enter_bank(conn, bank_id, make_bank=make_bank, alone=alone, wait=wait)
            if found == ENTERED:
                queued.leave()
                if slots is not None and wait:
                    await held.enter_async_context(slots)
                await check_claim(conn, claim)
                yield conn
                return
        if found == CHANGES_BUSY:
            wait = True
        else:
            await wait_for_bank_writers(pool, bank_id, import_wait, undone)


class _Place:
    """A writer's place in its bank's queue (`_changes_queue`), left once it holds the changes lock."""

    def __init__(self, leave: Callable[[], None] | None = None) -> None:
        self._leave = leave

    def leave(self) -> None:
        if self._leave is not None:
            self._leave()
            self._leave = None


@asynccontextmanager
async def _no_queue() -> AsyncIterator[_Place]:
    yield _Place()


# Per event loop, per bank: the lock the writers of this process waiting for the bank's changes lock
# queue on, and how many hold or wait for it (the entry goes when none do).
_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, list[Any]]] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def _changes_queue(bank_id: str) -> AsyncIterator[_Place]:
    """Wait for this process's turn to wait in PostgreSQL for the bank's changes lock; the turn passes
    on when the place is left (the lock taken) or the block ends."""
    queues = _QUEUES.setdefault(asyncio.get_running_loop(), {})
    entry = queues.setdefault(bank_id, [asyncio.Lock(), 0])
    entry[1] += 1
    turn: asyncio.Lock = entry[0]
    try:
        await turn.acquire()
        place = _Place(turn.release)
        try:
            yield place
        finally:
            place.leave()
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del queues[bank_id]


async def wait_for_bank_writers(pool: Any, bank_id: str, timeout: float | None, undone: str = "retained") -> None:
    """Return once no import holds the bank's writers lock, looking at most every second without
    keeping a connection. Past `timeout` seconds (None: as long as the import takes), BankBusy saying
    that nothing was `undone`."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    delay = 0.05
    while not await pool.fetchval(f"SELECT {bank_writers_free('$1')}", bank_id):
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            raise BankBusy(f"an import into bank '{bank_id}' is under way and holds its writers; nothing was "
                           f"{undone}: retry once the import has finished (the bank's operations show it)")
        await asyncio.sleep(delay if left is None else min(delay, left))
        delay = min(delay * 2, 1.0)


async def hold_bank_writers(conn: Any, bank_id: str, claim: Claim | None = None) -> None:
    """The bank's writers lock, exclusively: waits for the retains writing to the bank, and keeps new
    ones from locking a document or a name until this transaction ends. Then, for an import a worker
    runs (`claim`), ClaimLost unless the worker still holds the operation: its bank was deleted, or
    another worker took it over."""
    await conn.execute(f"SELECT pg_advisory_xact_lock({_BANK_WRITERS_KEY})", bank_id)
    await check_claim(conn, claim)
