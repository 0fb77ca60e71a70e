"""Structured-output models: what the extraction, versioning and entity-resolution prompts ask the LLM for.

The models are deliberately forgiving at the list level: one malformed fact must not cost the whole session, so
``SessionExtraction`` validates each item on its own, keeps the valid ones and records why the others were
dropped (``dropped``). Field-level coercions (``kind`` in any case, unknown kinds as ``other``) absorb the
harmless sloppiness of small models. The JSON schema the LLM sees is still the strict item schema.

Field order matters: grammar-constrained servers (llama.cpp) generate properties in schema order, so the order
here matches the worked example in ``prompts/extract_session.md`` (facts first, ``text`` first, rarely used
fields last). Only the text-bearing fields are required; everything else has a default.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator, model_validator

from graphrecall.models import FactKind

_KINDS = {k.value for k in FactKind}


def _strip_str(v: Any) -> Any:
    return v.strip() if isinstance(v, str) else v


def _ids(v: Any) -> Any:
    """Accept a single id or a comma-separated string where a list is asked for (a common small-model slip)."""
    if v is None:
        return []
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class ExtractedFact(BaseModel):
    """One atomic statement about the user or their world."""

    text: str = Field(min_length=3, description="self-contained statement, pronouns resolved")
    kind: FactKind = Field(
        default=FactKind.other, description="preference|attribute|plan|event|relationship|opinion|other"
    )
    polarity: Literal["positive", "negative"] = "positive"
    when: str | None = Field(
        default=None, description="when it became true, as said ('last month') or ISO date"
    )
    message_ids: list[str] = Field(default_factory=list)
    about: list[str] = Field(default_factory=list, description="names of the entities the fact is about")
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)

    _text = field_validator("text", mode="before")(_strip_str)
    _mids = field_validator("message_ids", "about", mode="before")(_ids)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip().lower()
            return v if v in _KINDS else FactKind.other.value
        return v

    @field_validator("polarity", mode="before")
    @classmethod
    def _polarity(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class ExtractedEvent(BaseModel):
    """Something that happened or will happen, as subject-verb-object with a time."""

    subject: str = Field(min_length=1)
    verb: str = Field(min_length=1)
    object: str = ""
    text: str = Field(min_length=3, description="one full sentence")
    when: str | None = Field(default=None, description="the time as said, e.g. 'last Tuesday'")
    time_start: str | None = Field(default=None, description="ISO date or datetime, resolved")
    time_end: str | None = None
    message_ids: list[str] = Field(default_factory=list)

    _strs = field_validator("subject", "verb", "text", mode="before")(_strip_str)
    _mids = field_validator("message_ids", mode="before")(_ids)

    @field_validator("object", mode="before")
    @classmethod
    def _obj(cls, v: Any) -> Any:
        return "" if v is None else _strip_str(v)


class ExtractedEntity(BaseModel):
    """A named thing with every other way the session refers to it."""

    name: str = Field(min_length=1)
    type: str = "thing"
    aliases: list[str] = Field(default_factory=list)

    _name = field_validator("name", mode="before")(_strip_str)

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> Any:
        return "thing" if v is None else (v.strip().lower() or "thing") if isinstance(v, str) else v

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            return [v]
        if isinstance(v, list):
            return [a.strip() for a in v if isinstance(a, str) and a.strip()]
        return v


class ExtractedRelation(BaseModel):
    """A typed link between two entities named in ``entities``."""

    source: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    target: str = Field(min_length=1)
    message_ids: list[str] = Field(default_factory=list)

    _mids = field_validator("message_ids", mode="before")(_ids)


_ITEM_MODELS: dict[str, type[BaseModel]] = {
    "facts": ExtractedFact,
    "events": ExtractedEvent,
    "entities": ExtractedEntity,
    "relations": ExtractedRelation,
}


def _lenient_lists(data: Any, models: dict[str, type[BaseModel]]) -> tuple[Any, list[str]]:
    """Validate every list item alone; return the data with invalid items removed, and why they were."""
    dropped: list[str] = []
    if not isinstance(data, dict):
        return data, dropped
    data = dict(data)
    for key, model in models.items():
        items = data.get(key)
        if items is None:
            data[key] = []
            continue
        if not isinstance(items, list):
            dropped.append(f"{key}: expected a list, got {type(items).__name__}")
            data[key] = []
            continue
        kept = []
        for i, item in enumerate(items):
            try:
                model.model_validate(item)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(p) for p in first["loc"])
                dropped.append(f"{key}[{i}]{'.' + loc if loc else ''}: {first['msg']}")
                continue
            kept.append(item)
        data[key] = kept
    return data, dropped


class SessionExtraction(BaseModel):
    """Everything one extraction call returns for a session (or a batch of its messages)."""

    facts: list[ExtractedFact] = Field(default_factory=list)
    events: list[ExtractedEvent] = Field(default_factory=list)
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relations: list[ExtractedRelation] = Field(default_factory=list)

    _dropped: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_valid_items(cls, data: Any, handler: Any) -> Any:
        cleaned, dropped = _lenient_lists(data, _ITEM_MODELS)
        inst = handler(cleaned)
        inst._dropped = [*inst._dropped, *dropped]
        return inst

    @property
    def dropped(self) -> list[str]:
        """Why items were removed while validating (index paths into the model's answer)."""
        return list(self._dropped)

    @property
    def item_count(self) -> int:
        return len(self.facts) + len(self.events) + len(self.entities) + len(self.relations)


Decision = Literal["NEW", "DUPLICATE", "UPDATE", "CONTRADICT"]


class VersionDecision(BaseModel):
    """The verdict on one new fact (``fact`` is its label, ``target`` a candidate's label)."""

    fact: str = Field(min_length=1)
    decision: Decision
    target: str | None = None
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("target", mode="before")
    @classmethod
    def _null(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() in {"", "null", "none"}:
            return None
        return v


class VersionDecisions(BaseModel):
    """The answer to one batched versioning prompt."""

    decisions: list[VersionDecision] = Field(default_factory=list)

    _dropped: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_valid_items(cls, data: Any, handler: Any) -> Any:
        cleaned, dropped = _lenient_lists(data, {"decisions": VersionDecision})
        inst = handler(cleaned)
        inst._dropped = [*inst._dropped, *dropped]
        return inst

    @property
    def dropped(self) -> list[str]:
        return list(self._dropped)


class EntityMatch(BaseModel):
    """The answer to the resolve_entity prompt: the label of the matching known entity, or null."""

    match: str | None = None
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    reason: str = ""

    @field_validator("match", mode="before")
    @classmethod
    def _null(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() in {"", "null", "none"}:
            return None
        return v


class MergeDecision(BaseModel):
    """The answer to the consolidate_facts prompt for one cluster: MERGE (into ``keep``, reworded to ``text``
    when given) or SEPARATE. Case and blank values are forgiven; anything else is invalid and the cluster is left
    alone (the safe default: nothing is superseded)."""

    decision: Literal["MERGE", "SEPARATE"]
    keep: str | None = None
    text: str | None = None
    reason: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("keep", "text", mode="before")
    @classmethod
    def _blank(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() in {"", "null", "none"}:
            return None
        return v.strip() if isinstance(v, str) else v


class PeriodSummaryAnswer(BaseModel):
    """The answer to the summarize_period prompt: one short paragraph, or empty when nothing is worth keeping."""

    summary: str = ""

    @field_validator("summary", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return " ".join(v.split()) if isinstance(v, str) else ("" if v is None else v)
