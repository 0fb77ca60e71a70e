"""The verifier: one structured call deciding whether retrieved memory can answer the question.

Readers asked directly tend to answer *something* even when memory holds nothing on the subject, which is wrong
for a memory system (LongMemEval's abstention questions measure exactly that). A separate, narrow judgement
("is it there?") is easier for a model than "answer, unless you can't", and its ``missing`` field doubles as a
targeted query for one more retrieval when the evidence is partial.
"""

from __future__ import annotations

from datetime import datetime

from graphrecall.llm import LLM, LLMResponse
from graphrecall.prompts import load_prompt
from graphrecall.read.models import VerifierJudgement


def format_date(d: datetime | None) -> str:
    return d.strftime("%Y-%m-%d (%A)") if d else "unknown"


def verify(
    llm: LLM, question: str, context: str, question_date: datetime | None
) -> tuple[VerifierJudgement, LLMResponse]:
    """Ask ``llm`` for a ``VerifierJudgement``; a structured-output failure propagates to the caller."""
    prompt = load_prompt("verifier").render(
        question=question,
        question_date=format_date(question_date),
        context=context.strip() or "(nothing found)",
    )
    judgement, resp = llm.parse_sync(prompt, VerifierJudgement, purpose="verify")
    if judgement.verdict != "YES" and not judgement.missing.strip():
        judgement = judgement.model_copy(update={"missing": question})
    return judgement, resp
