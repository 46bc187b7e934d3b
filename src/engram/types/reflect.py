"""Wire models for reflect, mental models and directives."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool

from engram.types.memory import INT32_MAX, Budget, FactType, Model, TagGroups, TagsMatch, TokenUsage


class FactsIncludeOptions(Model):
    pass


class ToolCallsIncludeOptions(Model):
    output: StrictBool = True


class ReflectIncludeOptions(Model):
    facts: FactsIncludeOptions | None = None
    tool_calls: ToolCallsIncludeOptions | None = None


class ReflectRequest(Model):
    query: str
    budget: Budget = "low"
    context: str | None = None
    max_tokens: int = Field(4096, ge=1)
    include: ReflectIncludeOptions = Field(default_factory=ReflectIncludeOptions)
    response_schema: dict[str, Any] | None = None
    tags: list[str] | None = None
    tags_match: TagsMatch = "any"
    tag_groups: TagGroups | None = None
    apply_all_directives: StrictBool = False
    fact_types: list[FactType] | None = None
    exclude_mental_models: StrictBool = False
    exclude_mental_model_ids: list[str] | None = None
    reflect_search_observations_max_tokens: int | None = None
    reflect_search_observations_include_entities: StrictBool | None = None


class ReflectFact(Model):
    id: str | None = None
    text: str
    type: str | None = None
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    mentioned_at: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, str] | None = None


class ReflectMentalModel(Model):
    id: str
    text: str
    context: str | None = None


class ReflectDirective(Model):
    id: str
    name: str
    content: str


class ReflectBasedOn(Model):
    memories: list[ReflectFact] = Field(default_factory=list)
    mental_models: list[ReflectMentalModel] = Field(default_factory=list)
    directives: list[ReflectDirective] = Field(default_factory=list)


class ReflectToolCall(Model):
    tool: str
    input: dict[str, Any]
    output: dict[str, Any] | None = None
    duration_ms: int
    iteration: int = 0


class ReflectLLMCall(Model):
    scope: str
    duration_ms: int


class ReflectTrace(Model):
    tool_calls: list[ReflectToolCall] = Field(default_factory=list)
    llm_calls: list[ReflectLLMCall] = Field(default_factory=list)


class ReflectResponse(Model):
    text: str
    based_on: ReflectBasedOn | None = None
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
    usage: TokenUsage | None = None
    trace: ReflectTrace | None = None


class MentalModelTrigger(Model):
    budget: Budget | None = None
    mode: Literal["full", "delta"] = "full"
    refresh_after_consolidation: StrictBool = False
    refresh_cron: str | None = None
    full_refresh_cron: str | None = None
    min_refresh_interval_seconds: int | None = None
    fact_types: list[FactType] | None = None
    exclude_mental_models: StrictBool = False
    exclude_mental_model_ids: list[str] | None = None
    tags_match: TagsMatch | None = None
    tag_groups: TagGroups | None = None
    include_chunks: StrictBool | None = None
    recall_max_tokens: int | None = None
    recall_chunks_max_tokens: int | None = None
    reflect_search_observations_max_tokens: int | None = None
    reflect_search_observations_include_entities: StrictBool | None = None
    response_schema: dict[str, Any] | None = None
    keep_trace: StrictBool = False


class CreateMentalModelRequest(Model):
    id: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")
    name: str = Field(min_length=1)
    source_query: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    max_tokens: int = Field(2048, ge=1, le=INT32_MAX)
    trigger: MentalModelTrigger = Field(default_factory=MentalModelTrigger)


class UpdateMentalModelRequest(Model):
    name: str | None = None
    source_query: str | None = None
    max_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    tags: list[str] | None = None
    trigger: MentalModelTrigger | None = None


class CreateDirectiveRequest(Model):
    name: str = Field(min_length=1)
    content: str = Field(min_length=1)
    priority: int = Field(0, ge=-INT32_MAX - 1, le=INT32_MAX)
    is_active: StrictBool = True
    tags: list[str] = Field(default_factory=list)


class UpdateDirectiveRequest(Model):
    name: str | None = None
    content: str | None = None
    priority: int | None = Field(None, ge=-INT32_MAX - 1, le=INT32_MAX)
    is_active: StrictBool | None = None
    tags: list[str] | None = None
