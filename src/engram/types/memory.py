"""Wire models for banks, retain, recall and operations."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, field_validator

INT32_MAX = 2**31 - 1  # PostgreSQL `integer` columns (priorities, token budgets stored with a model)
FactType = Literal["world", "experience", "observation"]
TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
Budget = Literal["low", "mid", "high"]
ScopeMode = Literal["per_tag", "combined", "all_combinations", "shared"]
ObservationScopes = Union[ScopeMode, list[list[str]]]


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


# --- tags -------------------------------------------------------------------------------------


class TagGroupLeaf(Model):
    tags: list[str]
    match: TagsMatch = "any_strict"
    resolve: Literal["exact", "fuzzy"] = "exact"


class TagGroupAnd(Model):
    and_: list[TagGroup] = Field(alias="and")


class TagGroupOr(Model):
    or_: list[TagGroup] = Field(alias="or")


class TagGroupNot(Model):
    not_: TagGroup = Field(alias="not")


TagGroup = Union[TagGroupLeaf, TagGroupAnd, TagGroupOr, TagGroupNot]
for _model in (TagGroupAnd, TagGroupOr, TagGroupNot):
    _model.model_rebuild()

MAX_TAG_GROUP_DEPTH = 8
MAX_TAG_GROUP_NODES = 256  # groups and leaves together: each becomes a condition of the SQL


def _bounded_tag_groups(groups: list[TagGroup]) -> list[TagGroup]:
    """Refuses tag groups nested deeper or larger than the limits (a 400, raised past pydantic so
    it keeps its status and field)."""
    from engram.errors import InvalidInput

    stack: list[tuple[TagGroup, int]] = [(group, 1) for group in groups]
    nodes = 0
    while stack:
        group, depth = stack.pop()
        nodes += 1
        if depth > MAX_TAG_GROUP_DEPTH:
            raise InvalidInput("tag_groups", f"nested deeper than {MAX_TAG_GROUP_DEPTH} levels")
        if nodes > MAX_TAG_GROUP_NODES:
            raise InvalidInput("tag_groups", f"more than {MAX_TAG_GROUP_NODES} groups and leaves")
        children = getattr(group, "and_", None) or getattr(group, "or_", None) or []
        if isinstance(group, TagGroupNot):
            children = [group.not_]
        stack.extend((child, depth + 1) for child in children)
    return groups


TagGroups = Annotated[list[TagGroup], AfterValidator(_bounded_tag_groups)]


# --- banks ------------------------------------------------------------------------------------


class DispositionTraits(Model):
    skepticism: int = Field(3, ge=1, le=5)
    literalism: int = Field(3, ge=1, le=5)
    empathy: int = Field(3, ge=1, le=5)


class CreateBankRequest(Model):
    name: str | None = None
    disposition: DispositionTraits | None = None
    disposition_skepticism: int | None = Field(None, ge=1, le=5)
    disposition_literalism: int | None = Field(None, ge=1, le=5)
    disposition_empathy: int | None = Field(None, ge=1, le=5)
    mission: str | None = None
    background: str | None = None
    reflect_mission: str | None = None
    retain_mission: str | None = None
    retain_extraction_mode: str | None = None
    retain_custom_instructions: str | None = None
    retain_chunk_size: int | None = Field(None, gt=0)
    retain_structured_chunk_size: int | None = Field(None, gt=0)
    retain_max_attachments_per_chunk: int | None = None
    enable_observations: StrictBool | None = None
    observations_mission: str | None = None
    enable_text_search: StrictBool | None = None
    enable_temporal_retrieval: StrictBool | None = None
    enable_graph_retrieval: StrictBool | None = None
    enable_reranking: StrictBool | None = None


class BankProfileResponse(Model):
    bank_id: str
    name: str
    disposition: DispositionTraits
    mission: str
    background: str | None = None


class BankListItem(Model):
    bank_id: str
    name: str | None = None
    disposition: DispositionTraits
    mission: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    fact_count: int = 0
    last_document_at: str | None = None
    last_write_at: str | None = None
    display_alias: str | None = None  # the primary alias, when one is set


class BankListResponse(Model):
    banks: list[BankListItem]
    total: int
    limit: int
    offset: int


class BankConfigUpdate(Model):
    updates: dict[str, Any]


class BankConfigResponse(Model):
    bank_id: str
    config: dict[str, Any]
    overrides: dict[str, Any]
    # Stored overrides that fail the settings schema (saved by an older version): ignored, with why.
    invalid_overrides: dict[str, str] = Field(default_factory=dict)


class DeleteResponse(Model):
    success: bool
    message: str | None = None
    deleted_count: int | None = None


# --- retain -----------------------------------------------------------------------------------


class EntityInput(Model):
    text: str = Field(min_length=1)
    type: str | None = None


class MemoryItem(Model):
    content: str | list[dict[str, Any]]
    timestamp: datetime | str | None = None
    context: str | None = None
    metadata: dict[str, str] | None = None
    document_id: str | None = None
    entities: list[EntityInput] | None = None
    resolve_entities: StrictBool = True
    tags: list[str] | None = None
    observation_scopes: ObservationScopes | None = None
    strategy: str | None = None
    update_mode: Literal["replace", "append"] | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> Any:
        # "unset" marks timeless content; any other string must parse as a date-time.
        if isinstance(value, str) and value.strip().lower() == "unset":
            return "unset"
        return value


class RetainRequest(Model):
    items: list[MemoryItem]
    async_: StrictBool = Field(False, alias="async")
    document_tags: list[str] | None = None
    operation_id: str | None = None


class TokenUsage(Model):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    thoughts_tokens: int = 0


class RetainResponse(Model):
    success: bool
    bank_id: str
    items_count: int
    async_: bool = Field(alias="async", serialization_alias="async")
    operation_id: str | None = None
    operation_ids: list[str] | None = None
    usage: TokenUsage | None = None


# --- recall -----------------------------------------------------------------------------------


class EntityIncludeOptions(Model):
    max_tokens: int = 500


class ChunkIncludeOptions(Model):
    max_tokens: int = 8192


class SourceFactsIncludeOptions(Model):
    max_tokens: int = 4096
    max_tokens_per_observation: int = -1


class IncludeOptions(Model):
    entities: EntityIncludeOptions | None = Field(default_factory=EntityIncludeOptions)
    chunks: ChunkIncludeOptions | None = None
    source_facts: SourceFactsIncludeOptions | None = None


class MinScores(Model):
    model_config = ConfigDict(extra="forbid")
    semantic: float | None = None
    keyword: float | None = None
    reranker: float | None = None
    final: float | None = None


class TemporalWindow(Model):
    start: datetime
    end: datetime


class RecallRequest(Model):
    query: str
    types: list[FactType] | None = None
    prefer_observations: StrictBool | None = None
    budget: Budget = "mid"
    max_tokens: int = Field(4096, ge=1)
    trace: StrictBool = False
    query_timestamp: datetime | None = None
    include: IncludeOptions = Field(default_factory=IncludeOptions)
    tags: list[str] | None = None
    tags_match: TagsMatch = "any"
    tag_groups: TagGroups | None = None
    min_scores: MinScores | None = None
    temporal_window: TemporalWindow | None = None


class RecallScores(Model):
    final: float
    reranker: float | None = None
    semantic: float | None = None
    keyword: float | None = None


class RecallResult(Model):
    id: str
    text: str
    type: str | None = None
    entities: list[str] | None = None
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    mentioned_at: str | None = None
    document_id: str | None = None
    metadata: dict[str, str] | None = None
    chunk_id: str | None = None
    tags: list[str] | None = None
    source_fact_ids: list[str] | None = None
    scores: RecallScores | None = None


class EntityObservation(Model):
    text: str
    mentioned_at: str | None = None
    stale: bool | None = None  # the entity's own observation: facts changed since it was generated


class EntityStateResponse(Model):
    entity_id: str
    canonical_name: str
    observations: list[EntityObservation]


class ChunkData(Model):
    id: str
    text: str
    chunk_index: int
    truncated: bool = False


class RecallResponse(Model):
    results: list[RecallResult]
    trace: dict[str, Any] | None = None
    entities: dict[str, EntityStateResponse] | None = None
    chunks: dict[str, ChunkData] | None = None
    source_facts: dict[str, RecallResult] | None = None
    source_facts_truncated: bool | None = None


# --- operations -------------------------------------------------------------------------------


class OperationProgress(Model):
    stage: str
    at: str
    processed: int | None = None
    total: int | None = None
    detail: dict[str, int] | None = None


class AsyncOperationSubmitResponse(Model):
    operation_id: str
    status: str
