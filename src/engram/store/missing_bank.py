"""The statement that makes a bank with defaults when no committed one exists, shared by `banks` and
`writer_locks` (which add conditions to it), so neither imports the other."""

# Inserts the bank $1 with defaults unless a committed one exists (more conditions may follow, with
# AND). Inserted regardless, the conflict on a bank row that an import (or any open transaction) had
# updated waited for that transaction's end, holding a pooled connection all the while.
MISSING_BANK = """INSERT INTO banks (bank_id, name) SELECT $1, $1
    WHERE NOT EXISTS (SELECT 1 FROM banks WHERE bank_id = $1) {and_also} ON CONFLICT (bank_id) DO NOTHING"""
