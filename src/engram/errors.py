"""Errors a user can act on. The API maps each class to an HTTP status; the message says what to fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.store.writer_locks import Claim


class EngramError(Exception):
    """Base class. `status` is the HTTP status the API answers with."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(EngramError):
    status = 404


class BankNotFound(NotFound):
    def __init__(self, bank_id: str) -> None:
        super().__init__(f"bank '{bank_id}' not found")
        self.bank_id = bank_id


class InvalidInput(EngramError):
    """Bad request data; `field` names the offending field so the caller can fix it."""

    status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class PayloadTooLarge(InvalidInput):
    status = 413


class Conflict(EngramError):
    status = 409


class DocumentChanged(Conflict):
    """Another retain or delete changed a document between this retain's plan and its write."""

    def __init__(self, document_id: str) -> None:
        super().__init__(f"document '{document_id}' changed during this retain; retry it")


class ClaimLost(Conflict):
    """A worker about to write for a queued operation no longer holds it: its bank was deleted (with
    its operations), or its lease ran out and another worker took it over."""

    def __init__(self, claim: Claim) -> None:
        super().__init__(f"operation {claim.operation_id} is no longer this worker's (its bank was deleted, "
                         "or another worker took it over): nothing more of it is written")


class LLMNotConfigured(EngramError):
    """A feature needs an LLM and none is configured."""

    status = 400

    def __init__(self, feature: str) -> None:
        super().__init__(
            f"{feature} needs an LLM: set ENGRAM_LLM_PROVIDER (or HINDSIGHT_API_LLM_PROVIDER) and its "
            "ENGRAM_LLM_API_KEY / ENGRAM_LLM_MODEL / ENGRAM_LLM_BASE_URL"
        )


class LLMError(EngramError):
    """The LLM provider failed (network, HTTP error, or output that never validated)."""

    status = 502


class InvalidLLMOutput(LLMError):
    """The LLM answered, but never with output that validates (after the bounded retries)."""


class StoreUnavailable(EngramError):
    """The database cannot be reached or started."""

    status = 503


class BankBusy(EngramError):
    """A bank-wide operation (an import) holds the bank's writers for longer than a request waits."""

    status = 503


class EmbeddingModelError(EngramError):
    """ENGRAM_EMBEDDING_MODEL names a model that is unknown, not installed, or not the one that embedded
    the database's stored vectors."""

    status = 503
