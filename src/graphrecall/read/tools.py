"""The Reader's tools: search_memory, timeline, date_math, current_facts, read_round; and the text protocol for
models without native tool calling.

Why tools at all: small context budgets miss evidence, and models are bad at calendar arithmetic. A model that can
search again, list what happened between two dates (with counts) and compute "days between" exactly answers
temporal and counting questions far more reliably than one that guesses. Every tool returns JSON text; a bad
argument or a failure becomes an ``{"error": ...}`` result for the model to read, never an exception in the loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from graphrecall.dates import parse_date
from graphrecall.errors import GraphRecallError
from graphrecall.llm import ToolCall, ToolSpec
from graphrecall.models import DocumentRef, Hit, HitKind, TimeRange
from graphrecall.read.access import MemoryAccess

RESULT_CHARS = 2400
SNIPPET_CHARS = 300
READ_CHARS = 6000
"""``read_round`` returns a round's text in pages of this many characters: a long reply in two or three calls,
while one result still fits a small model's context beside the excerpts."""


class SearchMemoryArgs(BaseModel):
    """Search the user's memory (past conversations; extracted facts and events when available)."""

    query: str = Field(description="what to look for, in plain words")
    kinds: list[HitKind] = Field(
        default_factory=lambda: list[HitKind](["round"]),
        description="round = conversation turns; fact; event",
    )
    k: int = Field(default=5, ge=1, le=20, description="how many results")


class TimelineArgs(BaseModel):
    """List (and count) conversation rounds and events between two dates, oldest first; optionally only those
    matching a query."""

    start: str = Field(description="start date, YYYY-MM-DD")
    end: str = Field(description="end date, YYYY-MM-DD (inclusive)")
    query: str | None = Field(default=None, description="only items about this (optional)")
    limit: int = Field(default=20, ge=1, le=100)


class DateMathArgs(BaseModel):
    """Exact calendar arithmetic: days_between two dates, add_days to a date, or the weekday of a date."""

    op: Literal["days_between", "add_days", "weekday"]
    date: str = Field(description="a date, YYYY-MM-DD")
    other_date: str | None = Field(default=None, description="days_between: the second date")
    days: int | None = Field(default=None, description="add_days: how many days (negative goes back)")


class CurrentFactsArgs(BaseModel):
    """What was true about the user at a date (default: the question date): the latest known facts."""

    as_of: str | None = Field(default=None, description="YYYY-MM-DD; default the question date")
    query: str | None = Field(default=None, description="only facts about this (optional)")
    limit: int = Field(default=15, ge=1, le=50)


class ReadRoundArgs(BaseModel):
    """The full text of one conversation round, by the id shown in brackets; for items marked "excerpt", whose
    elided parts ("…") may hold what you need."""

    id: str = Field(description="the round id, as shown in brackets, e.g. 3f2a…@4")
    offset: int = Field(
        default=0, ge=0, description="where to continue a long round (the next_offset returned)"
    )


TOOL_ARGS: dict[str, type[BaseModel]] = {
    "search_memory": SearchMemoryArgs,
    "timeline": TimelineArgs,
    "date_math": DateMathArgs,
    "current_facts": CurrentFactsArgs,
    "read_round": ReadRoundArgs,
}


def tool_specs() -> list[ToolSpec]:
    return [ToolSpec.from_model(model, name=name) for name, model in TOOL_ARGS.items()]


# -- date arithmetic (pure) ---------------------------------------------------------------------------------------
def _day(text: str, what: str) -> date:
    try:
        return parse_date(text, where=what).date()
    except GraphRecallError:
        raise ValueError(f"{what} {text!r} is not a date (use YYYY-MM-DD)") from None


def date_math(args: DateMathArgs) -> dict[str, Any]:
    """Exact: whole calendar days, no time-of-day rounding."""
    d = _day(args.date, "date")
    if args.op == "weekday":
        return {"date": d.isoformat(), "weekday": d.strftime("%A")}
    if args.op == "add_days":
        if args.days is None:
            raise ValueError("add_days needs 'days'")
        out = d + timedelta(days=args.days)
        return {"date": out.isoformat(), "weekday": out.strftime("%A")}
    if args.other_date is None:
        raise ValueError("days_between needs 'other_date'")
    other = _day(args.other_date, "other_date")
    delta = (other - d).days
    return {"from": d.isoformat(), "to": other.isoformat(), "days": abs(delta), "signed_days": delta,
            "weeks": round(abs(delta) / 7, 2)}  # fmt: skip


# -- the toolbox --------------------------------------------------------------------------------------------------
def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _hit_json(h: Hit) -> dict[str, Any]:
    return {"id": h.id, "kind": h.kind, "date": h.date.date().isoformat() if h.date else None,
            "session": h.session_id, "text": _snippet(h.text)}  # fmt: skip


def _dump(value: Any, limit: int = RESULT_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 20] + ' ..."(truncated)"'


class ToolResult(BaseModel):
    content: str
    summary: str
    error: str | None = None
    hits: list[Hit] = Field(default_factory=list)


class ToolBox:
    """Runs tool calls against one scope's memory. ``hits`` found by searches are returned so the Reader can
    cite them."""

    def __init__(self, access: MemoryAccess) -> None:
        self.access = access
        self._impl: dict[str, Callable[[Any], tuple[dict[str, Any], list[Hit]]]] = {
            "search_memory": self._search,
            "timeline": self._timeline,
            "date_math": lambda a: (date_math(a), []),
            "current_facts": self._current_facts,
            "read_round": self._read_round,
        }

    def run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Never raises: unknown tools, invalid arguments and failures come back as error results."""
        model = TOOL_ARGS.get(name)
        if model is None:
            return _error(f"unknown tool {name!r}; available: {', '.join(TOOL_ARGS)}")
        try:
            args = model.model_validate(arguments)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "arguments"
            return _error(f"invalid arguments for {name}: {loc}: {first['msg']}")
        try:
            payload, hits = self._impl[name](args)
        except (ValueError, GraphRecallError) as e:
            return _error(f"{name} failed: {e}")
        except Exception as e:  # a tool bug must not end the conversation; the model gets told
            return _error(f"{name} failed unexpectedly: {type(e).__name__}: {e}")
        limit = RESULT_CHARS + READ_CHARS if name == "read_round" else RESULT_CHARS
        return ToolResult(content=_dump(payload, limit), summary=_summary(name, payload), hits=hits)

    def _search(self, a: SearchMemoryArgs) -> tuple[dict[str, Any], list[Hit]]:
        if not a.query.strip():
            raise ValueError("query must not be empty")
        kinds: tuple[HitKind, ...] = tuple(dict.fromkeys(a.kinds)) or ("round",)
        hits = self.access.search(a.query, a.k, kinds=kinds)
        note = None
        if set(kinds) - {"round"} and not self.access.has_extracted:
            note = "no extracted facts/events in this memory: searched conversation rounds only"
        out: dict[str, Any] = {"results": [_hit_json(h) for h in hits], "count": len(hits)}
        if note:
            out["note"] = note
        return out, hits

    def _timeline(self, a: TimelineArgs) -> tuple[dict[str, Any], list[Hit]]:
        start = datetime.combine(_day(a.start, "start"), datetime.min.time())
        end = datetime.combine(_day(a.end, "end"), datetime.max.time())
        if end < start:
            raise ValueError(f"end {a.end} is before start {a.start}")
        tr = TimeRange(start=start, end=end, expression=f"{a.start}..{a.end}")
        if a.query:
            found = self.access.search(a.query, 50, time_range=tr)
            hits = [h for h in found if h.date is not None and start <= h.date <= end]
        else:
            hits = [
                Hit(
                    id=r.id,
                    text=r.text,
                    score=0.0,
                    session_id=r.session_id,
                    date=r.at,
                    message_ids=r.message_ids,
                    document=DocumentRef.of_round(r.text, r.idx),
                )
                for r in self.access.rounds_between(start, end, limit=500)
            ]
        hits.sort(key=lambda h: (h.date or start, h.id))
        events = self.access.events_between(start, end, limit=500)
        if a.query:
            words = {w for w in re.findall(r"\w+", a.query.lower()) if len(w) > 2}
            events = [e for e in events if words & set(re.findall(r"\w+", e.text.lower()))]
        out: dict[str, Any] = {
            "range": [start.date().isoformat(), end.date().isoformat()],
            "round_count": len(hits),
            "session_count": len({h.session_id for h in hits}),
            "event_count": len(events),
            "rounds": [_hit_json(h) for h in hits[: a.limit]],
            "events": [
                {
                    "id": e.id,
                    "date": e.time_start.date().isoformat() if e.time_start else None,
                    "text": e.text,
                }
                for e in events[: a.limit]
            ],
        }
        return out, hits[: a.limit]

    def _current_facts(self, a: CurrentFactsArgs) -> tuple[dict[str, Any], list[Hit]]:
        as_of = datetime.combine(_day(a.as_of, "as_of"), datetime.max.time()) if a.as_of else None
        if self.access.has_extracted:
            facts = self.access.facts(as_of, limit=500)
            if a.query:
                words = {w for w in re.findall(r"\w+", a.query.lower()) if len(w) > 2}
                facts = [f for f in facts if words & set(re.findall(r"\w+", f.text.lower()))] or facts
            facts.sort(key=lambda f: f.valid_from or f.recorded_at or datetime.min, reverse=True)
            items = [
                {
                    "id": f.id,
                    "text": f.text,
                    "since": f.valid_from.date().isoformat() if f.valid_from else None,
                }
                for f in facts[: a.limit]
            ]
            return {"source": "extracted facts", "facts": items, "count": len(items)}, []
        if not a.query:
            raise ValueError(
                "this memory has no extracted facts; pass 'query' to get the latest matching conversation rounds"
            )
        hits = self.access.search(a.query, a.limit)
        if as_of is not None:
            hits = [h for h in hits if h.date is None or h.date <= as_of]
        hits.sort(key=lambda h: h.date or datetime.min, reverse=True)
        return {
            "source": "conversation rounds, newest first (no extracted facts in this memory)",
            "rounds": [_hit_json(h) for h in hits],
            "count": len(hits),
        }, hits

    def _read_round(self, a: ReadRoundArgs) -> tuple[dict[str, Any], list[Hit]]:
        found = self.access.rounds([a.id.strip().strip("[]")])
        if not found:
            raise ValueError(f"no round {a.id!r} in this memory (use an id shown in brackets)")
        r = found[0]
        if a.offset >= max(1, len(r.text)):
            raise ValueError(f"offset {a.offset} is past the end of round {r.id} ({len(r.text)} characters)")
        end = min(len(r.text), a.offset + READ_CHARS)
        out: dict[str, Any] = {"id": r.id, "session": r.session_id, "date": r.at.date().isoformat(),
                               "text": r.text[a.offset : end], "characters": len(r.text)}  # fmt: skip
        if end < len(r.text):
            out["next_offset"] = end
        hit = Hit(
            id=r.id, text=r.text, score=0.0, session_id=r.session_id, date=r.at, message_ids=r.message_ids,
            document=DocumentRef.of_round(r.text, r.idx),
        )  # fmt: skip
        return out, [hit]


def _error(message: str) -> ToolResult:
    return ToolResult(content=json.dumps({"error": message}), summary=f"error: {message}", error=message)


def _summary(name: str, payload: dict[str, Any]) -> str:
    if name == "date_math":
        return _snippet(json.dumps(payload), 160)
    if name == "read_round":
        return f"round {payload['id']}: {len(payload['text'])} of {payload['characters']} characters"
    if name == "timeline":
        return f"{payload['round_count']} rounds in {payload['session_count']} sessions, {payload['event_count']} events"
    for key in ("results", "facts", "rounds"):
        if key in payload:
            return f"{len(payload[key])} {key}"
    return _snippet(json.dumps(payload, default=str), 160)


# -- text protocol ------------------------------------------------------------------------------------------------
TEXT_PROTOCOL = """You can call tools. To call one, reply with ONLY a JSON object of this form and nothing else:
{{"tool": "<name>", "arguments": {{...}}}}
The result comes back in the next message. When you have what you need, reply with the final answer format instead.
Tools:
{tools}"""


def text_protocol_instructions(specs: list[ToolSpec]) -> str:
    lines = []
    for s in specs:
        props = s.parameters.get("properties", {})
        params = ", ".join(f"{k}: {v.get('type', v.get('anyOf', 'any'))}" for k, v in props.items())
        lines.append(f"- {s.name}({params}): {s.description}")
    return TEXT_PROTOCOL.format(tools="\n".join(lines))


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _objects(text: str) -> Iterator[str]:
    for m in _FENCE.finditer(text):
        yield m.group(1)
    depth, start = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and start >= 0:
                yield text[start : i + 1]


def parse_text_tool_calls(text: str, step: int = 0) -> list[ToolCall]:
    """Tool calls written as JSON in the text (``{"tool": name, "arguments": {...}}``; ``"name"`` is accepted
    for ``"tool"``). Only names of known tools count, so an answer that happens to contain JSON is not a call."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for raw in _objects(text):
        if raw in seen:
            continue
        seen.add(raw)
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        name = obj.get("tool", obj.get("name"))
        args = obj.get("arguments", obj.get("args", {}))
        if isinstance(name, str) and name in TOOL_ARGS and isinstance(args, dict):
            calls.append(ToolCall(id=f"text-{step}-{len(calls)}", name=name, arguments=args))
    return calls
