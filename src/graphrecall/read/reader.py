"""The mode-aware Reader: answers a question from one scope's memory.

``recall`` (facts the user said, what the assistant said, dates, counts): gather evidence, let the verifier
decide whether it is there (NO: abstain; PARTIAL: one more targeted search; YES: go on), then a Chain-of-Note
answer (a note per useful evidence item, then the answer) citing evidence ids, with dates anchored on the
question date. ``synthesis`` (recommendations): gather the user's own statements first and answer grounded in
their preferences, naming the ones used; no verifier gate, since a recommendation is always possible.

Both modes run a bounded tool loop (search_memory, timeline, date_math, current_facts) through the provider's
native tool calling, or a JSON text protocol for models without it (``tools="auto"`` switches to text when the
provider rejects native tools). Tool errors are fed back to the model; the step bound ends the loop with one
final tool-free call.

Sync on purpose: memory access is blocking (Kuzu), and the LLM layer's sync wrappers run the model I/O on a
shared event loop, so many Readers can run in a thread pool without blocking each other.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Literal

from graphrecall.llm import LLM, ChatMessage, LLMError, LLMResponse, StructuredOutputError, ToolCall
from graphrecall.models import Hit
from graphrecall.prompts import load_prompt
from graphrecall.read.access import MemoryAccess
from graphrecall.read.analysis import QuestionAnalysis, analyze
from graphrecall.read.classify import QuestionPlan, classify, classify_rules, classify_with_llm
from graphrecall.read.gather import Gathered, gather, widen
from graphrecall.read.models import Answer, Citation, Mode, Stage, StageStats, ToolTrace
from graphrecall.read.reply import ParsedReply, is_abstention, parse_reply
from graphrecall.read.tools import ToolBox, parse_text_tool_calls, text_protocol_instructions, tool_specs
from graphrecall.read.verifier import format_date, verify

ToolProtocol = Literal["auto", "native", "text", "none"]
ABSTAIN_TEXT = "I don't know: nothing in memory answers this"
_NATIVE_REJECTED = {400, 404, 422, 500, 501}


class Reader:
    """``Reader(llm, mode="recall"|"synthesis"|"auto", max_tool_steps=4)``; ``answer(access, question)``.

    ``token_budget`` caps the classifier's context budget (small local models have small context windows);
    ``max_tokens`` caps each reply."""

    def __init__(
        self,
        llm: LLM,
        mode: Mode | Literal["auto"] = "auto",
        *,
        max_tool_steps: int = 4,
        tools: ToolProtocol = "auto",
        verifier: bool = True,
        llm_classify: bool = False,
        max_tokens: int | None = 1024,
        token_budget: int | None = None,
    ) -> None:
        if max_tool_steps < 0:
            raise ValueError(f"max_tool_steps must be >= 0, got {max_tool_steps}")
        self.llm = llm
        self.mode = mode
        self.max_tool_steps = max_tool_steps
        self.tools: ToolProtocol = "none" if max_tool_steps == 0 else tools
        self.verifier = verifier
        self.llm_classify = llm_classify
        self.max_tokens = max_tokens
        self.token_budget = token_budget
        self._protocol: Literal["native", "text", "none"] = (
            "text" if self.tools == "text" else ("none" if self.tools == "none" else "native")
        )

    # -- planning ---------------------------------------------------------------------------------------------
    def plan(self, question: str) -> QuestionPlan:
        """The classifier's plan, with the LLM fallback when enabled and no rule claims the question; the
        Reader's fixed mode (if any) overrides the plan's."""
        plan = classify(question)
        if self.llm_classify and classify_rules(question) is None:
            plan = classify_with_llm(question, self.llm)
        mode = plan.mode if self.mode == "auto" else self.mode
        budget = plan.token_budget if self.token_budget is None else min(plan.token_budget, self.token_budget)
        return QuestionPlan(plan.type, mode, budget, plan.k, plan.rule)

    # -- the whole path ---------------------------------------------------------------------------------------
    def answer(self, access: MemoryAccess, question: str) -> Answer:
        """Answer ``question`` as asked at ``access.question_date``, from what ``access`` can see."""
        if not question.strip():
            raise ValueError("question must not be empty")
        qd = access.question_date
        stages: dict[Stage, StageStats] = {s: StageStats() for s in ("retrieve", "verify", "read", "tools")}
        plan = self.plan(question)
        t0 = time.perf_counter()
        analysis = analyze(question, qd, plan)
        synthesis = plan.mode == "synthesis"
        found = gather(access, analysis, k=plan.k, token_budget=plan.token_budget, synthesis=synthesis)
        stages["retrieve"].add(time.perf_counter() - t0)
        base = Answer(
            question=question,
            text="",
            mode=plan.mode,
            question_type=plan.type.value,
            question_date=qd,
            sub_questions=list(analysis.decomposition.sub_questions),
            time_range=_range_text(found),
            stages=stages,
        )
        verdict_ids: list[str] = []
        if not synthesis and self.verifier:
            t0 = time.perf_counter()
            try:
                judgement, resp = verify(self.llm, question, found.context.text, qd)
            except StructuredOutputError as e:  # an unusable verdict must not silence the reader
                stages["verify"].add(time.perf_counter() - t0)
                base.missing = f"verifier output unusable: {e.error}"
            else:
                stages["verify"].add(time.perf_counter() - t0, resp.usage)
                base.verdict, base.missing, verdict_ids = (
                    judgement.verdict,
                    judgement.missing,
                    judgement.evidence_ids,
                )
                if judgement.verdict == "NO":
                    base.text, base.abstained = f"{ABSTAIN_TEXT} ({judgement.missing.strip()})", True
                    base.retrieval_queries = found.queries
                    return base
                if judgement.verdict == "PARTIAL":
                    t1 = time.perf_counter()
                    found = widen(
                        access, found, judgement.missing, k=max(5, plan.k // 2),
                        token_budget=plan.token_budget + plan.token_budget // 2, question=question,
                    )  # fmt: skip
                    stages["retrieve"].add(time.perf_counter() - t1)
        base.retrieval_queries = found.queries
        return self._read(access, analysis, found, base, verdict_ids)

    # -- reading with tools -----------------------------------------------------------------------------------
    def _read(
        self,
        access: MemoryAccess,
        analysis: QuestionAnalysis,
        found: Gathered,
        base: Answer,
        verdict_ids: list[str],
    ) -> Answer:
        qd = base.question_date
        synthesis = base.mode == "synthesis"
        template = "reader_synthesis" if synthesis else "reader_recall"
        user = load_prompt(template).render(
            question=analysis.question,
            hints=_hints(analysis, found),
            context=found.context.text.strip() or "(nothing found in memory)",
            **({} if synthesis else {"question_date": format_date(qd)}),
        )
        messages = [ChatMessage.system(self._system(qd)), ChatMessage.user(user)]
        known: dict[str, Hit] = {h.id: h for h in found.context.hits}
        toolbox = ToolBox(access)
        text, stopped = self._loop(messages, toolbox, known, base)
        reply = parse_reply(text)
        base.text = reply.answer or text.strip()
        base.notes = reply.notes
        base.preferences = reply.preferences
        base.stopped_by_step_limit = stopped
        base.abstained = (not synthesis) and is_abstention(base.text)
        base.citations = [] if base.abstained else _citations(reply, verdict_ids, known)
        return base

    def _system(self, qd: datetime | None) -> str:
        note = ""
        if self._protocol == "native":
            note = (
                "You may call the tools provided (search memory again, read the whole of a round shown as an "
                "excerpt, list a timeline between dates with counts, exact date arithmetic, current facts) when "
                "the excerpts are not enough or a calculation is needed."
            )
        elif self._protocol == "text":
            note = text_protocol_instructions(tool_specs())
        return load_prompt("reader_system").render(question_date=format_date(qd), tools_note=note)

    def _loop(
        self, messages: list[ChatMessage], toolbox: ToolBox, known: dict[str, Hit], out: Answer
    ) -> tuple[str, bool]:
        """Call the model until it answers without tools or the step bound is reached."""
        last_text = ""
        for step in range(1, self.max_tool_steps + 2):
            offer_tools = step <= self.max_tool_steps
            resp = self._call(messages, offer_tools, out)
            calls, protocol = list(resp.tool_calls), "native"
            if not calls and self._protocol != "none":
                calls, protocol = parse_text_tool_calls(resp.text, step), "text"
            if not calls:
                return resp.text, not offer_tools
            if not offer_tools:  # asked to stop but still calling tools: keep whatever prose there is
                return _strip_calls(
                    resp.text
                ) or last_text or "I could not finish within the tool budget.", True
            last_text = _strip_calls(resp.text) or last_text
            self._run_calls(messages, resp, calls, protocol, step, toolbox, known, out)
            if step == self.max_tool_steps:
                messages.append(
                    ChatMessage.user(load_prompt("reader_finish").render(steps=self.max_tool_steps))
                )
        return last_text, True  # pragma: no cover - the last iteration always returns

    def _run_calls(
        self,
        messages: list[ChatMessage],
        resp: LLMResponse,
        calls: list[ToolCall],
        protocol: str,
        step: int,
        toolbox: ToolBox,
        known: dict[str, Hit],
        out: Answer,
    ) -> None:
        messages.append(ChatMessage.assistant(resp.text, calls if protocol == "native" else ()))
        for call in calls:
            t0 = time.perf_counter()
            result = toolbox.run(call.name, call.arguments)
            out.stages["tools"].add(time.perf_counter() - t0)
            for h in result.hits:
                known.setdefault(h.id, h)
            out.tool_trace.append(
                ToolTrace(
                    step=step, name=call.name, arguments=dict(call.arguments), result_summary=result.summary,
                    error=result.error, protocol="native" if protocol == "native" else "text",
                )
            )  # fmt: skip
            if protocol == "native":
                messages.append(ChatMessage.tool(call, result.content))
            else:
                messages.append(ChatMessage.user(f"Result of {call.name}: {result.content}"))

    def _call(self, messages: list[ChatMessage], offer_tools: bool, out: Answer) -> LLMResponse:
        t0 = time.perf_counter()
        native = offer_tools and self._protocol == "native"
        try:
            resp = self.llm.complete_sync(
                messages, tools=tool_specs() if native else None, max_tokens=self.max_tokens, purpose="read"
            )
        except LLMError as e:
            first_call = len(messages) == 2
            if not (native and self.tools == "auto" and first_call and e.status in _NATIVE_REJECTED):
                raise
            # The provider refuses native tools: describe them in the prompt instead, for this Reader's life.
            self._protocol = "text"
            messages[0] = ChatMessage.system(self._system(out.question_date))
            resp = self.llm.complete_sync(messages, max_tokens=self.max_tokens, purpose="read")
        out.stages["read"].add(time.perf_counter() - t0, resp.usage)
        return resp


def _strip_calls(text: str) -> str:
    if not parse_text_tool_calls(text):
        return text.strip()
    start = text.find("{")
    return text[:start].strip() if start > 0 else ""


def _hints(analysis: QuestionAnalysis, found: Gathered) -> str:
    parts = []
    if found.time_range is not None:
        tr = found.time_range
        parts.append(f"The question refers to {tr.start.date()} .. {tr.end.date()} ({tr.expression!r}).")
    if analysis.decomposition.compound:
        joined = "; ".join(analysis.decomposition.sub_questions)
        parts.append(f"It combines separate pieces of information: {joined}.")
    return ("Hints: " + " ".join(parts) + "\n") if parts else ""


def _range_text(found: Gathered) -> str | None:
    tr = found.time_range
    return None if tr is None else f"{tr.start.date()}..{tr.end.date()}"


def _citations(reply: ParsedReply, verdict_ids: list[str], known: dict[str, Hit]) -> list[Citation]:
    for ids in (reply.evidence_ids, verdict_ids, reply.mentioned_ids):
        chosen = [i for i in ids if i in known]
        if chosen:
            return [_cite(known[i]) for i in chosen]
    return []


def _cite(h: Hit) -> Citation:
    flat = " ".join(h.text.split())
    return Citation(
        hit_id=h.id, kind=h.kind, session_id=h.session_id, date=h.date,
        snippet=flat if len(flat) <= 240 else flat[:239] + "…",
    )  # fmt: skip
