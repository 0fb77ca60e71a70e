"""What the Reader returns (``Answer`` and its parts) and the structured outputs it asks the model for.

``Answer`` is the one object every caller sees (library, CLI, HTTP, benchmarks): the text, and enough of the
path to audit it: which evidence was cited, what the verifier decided, which tools ran and what each stage cost.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from graphrecall.llm.usage import Usage
from graphrecall.models import UtcDateTime

Mode = Literal["recall", "synthesis"]
Verdict = Literal["YES", "PARTIAL", "NO"]
Stage = Literal["retrieve", "verify", "read", "tools"]


class VerifierJudgement(BaseModel):
    """The verifier's structured output: does the retrieved context contain what the question asks for?"""

    verdict: Verdict = Field(
        description="YES: the context answers the question; PARTIAL: some of what is needed is there; NO: none"
    )
    missing: str = Field(
        default="",
        description="for PARTIAL/NO: what information is missing, written as a search query",
    )
    evidence_ids: list[str] = Field(
        default_factory=list, description="ids (in square brackets in the context) of the items that help"
    )


class Citation(BaseModel):
    """One evidence item the answer relied on, with where and when it was said."""

    hit_id: str
    kind: str = "round"
    session_id: str
    date: UtcDateTime | None = None
    snippet: str = ""


class ToolTrace(BaseModel):
    """One tool call the model made: what it asked, a short result, and the error if it failed."""

    step: int
    name: str
    arguments: dict[str, object] = Field(default_factory=dict)
    result_summary: str = ""
    error: str | None = None
    protocol: Literal["native", "text"] = "native"


class StageStats(BaseModel):
    """Wall time and LLM usage of one stage (retrieve, verify, read, tools)."""

    latency_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)

    def add(self, latency_s: float, usage: Usage | None = None) -> None:
        self.latency_s += latency_s
        if usage is not None:
            self.usage = self.usage + usage


class Answer(BaseModel):
    """An answer from memory, with its evidence and the trace of how it was produced."""

    question: str
    text: str
    mode: Mode
    question_type: str = ""
    question_date: UtcDateTime | None = None
    abstained: bool = False
    verdict: Verdict | None = None
    missing: str = ""
    citations: list[Citation] = Field(default_factory=list)
    notes: str = ""
    preferences: list[str] = Field(
        default_factory=list, description="synthesis: the user preferences that shaped the answer"
    )
    sub_questions: list[str] = Field(default_factory=list)
    retrieval_queries: list[str] = Field(default_factory=list)
    time_range: str | None = None
    tool_trace: list[ToolTrace] = Field(default_factory=list)
    stages: dict[Stage, StageStats] = Field(default_factory=dict)
    stopped_by_step_limit: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usage(self) -> Usage:
        """LLM usage summed over every stage (sent with the answer on every surface)."""
        total = Usage()
        for s in self.stages.values():
            total = total + s.usage
        return total

    @property
    def latency_s(self) -> float:
        return sum(s.latency_s for s in self.stages.values())
