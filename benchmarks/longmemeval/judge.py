"""LLM-as-judge for LongMemEval answers, per question category, following the official evaluation's criteria.

The criteria (LongMemEval's ``src/evaluation/evaluate_qa.py``): an answer is correct when it contains the gold
answer or something equivalent; temporal-reasoning tolerates an off-by-one in counts of days/weeks/months;
knowledge-update accepts an answer that also mentions the old value as long as the updated one is given;
single-session-preference is graded against a rubric (correct when it shows the desired personalisation);
abstention questions (``_abs``) are correct when the model says it cannot answer. The judge replies yes/no and,
as in the official script, a reply containing "yes" counts as correct.

Our prompts (``prompts/judge_*.md``) state those criteria in our own words. For numbers comparable with published
results, ``--official-judge PATH`` loads the official templates at run time from a local checkout of
xiaowu0162/LongMemEval: the ``get_anscheck_prompt`` function is taken out of ``evaluate_qa.py`` with ``ast`` and
run in isolation (the rest of that script, and its imports, are never executed). Nothing of it is copied here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrecall.llm import LLM, Usage
from graphrecall.prompts import load_prompt

OFFICIAL_FILE = Path("src") / "evaluation" / "evaluate_qa.py"
OFFICIAL_FUNCTION = "get_anscheck_prompt"

_TEMPLATES = {
    "temporal-reasoning": "judge_temporal",
    "knowledge-update": "judge_update",
    "single-session-preference": "judge_preference",
}


def template_for(question_type: str, abstention: bool) -> str:
    """Which of our judge prompts grades this category."""
    if abstention:
        return "judge_abstention"
    return _TEMPLATES.get(question_type, "judge_default")


class OfficialJudgeError(ValueError):
    """The official checkout is missing, or its evaluate_qa.py has no usable ``get_anscheck_prompt``."""


PromptFn = Callable[..., str]


def load_official(path: str | Path) -> PromptFn:
    """``get_anscheck_prompt(task, question, answer, response, abstention=False)`` from a local checkout
    (``path`` is the repository root or the ``evaluate_qa.py`` file itself)."""
    p = Path(path).expanduser()
    file = p if p.is_file() else p / OFFICIAL_FILE
    if not file.is_file():
        raise OfficialJudgeError(
            f"official judge: {file} not found (pass a LongMemEval checkout or its {OFFICIAL_FILE})"
        )
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == OFFICIAL_FUNCTION), None)
    if fn is None:
        raise OfficialJudgeError(f"official judge: {file} defines no function {OFFICIAL_FUNCTION}()")
    module = ast.Module(body=[fn], type_ignores=[])
    namespace: dict[str, Any] = {}
    exec(compile(module, str(file), "exec"), namespace)  # only this one function's definition
    found = namespace[OFFICIAL_FUNCTION]
    if not callable(found):  # pragma: no cover - a FunctionDef always defines a function
        raise OfficialJudgeError(f"official judge: {OFFICIAL_FUNCTION} is not callable")
    return found  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Judgement:
    correct: bool
    raw: str
    prompt_name: str
    usage: Usage


class Judge:
    """Grades one answer with one yes/no call. ``official`` swaps our templates for the official ones."""

    def __init__(self, llm: LLM, official: PromptFn | None = None, *, max_tokens: int = 10) -> None:
        self.llm = llm
        self.official = official
        self.max_tokens = max_tokens

    def prompt(
        self, question_type: str, question: str, gold: str, response: str, abstention: bool
    ) -> tuple[str, str]:
        if self.official is not None:
            text = self.official(question_type, question, gold, response, abstention=abstention)
            return "official", str(text)
        name = template_for(question_type, abstention)
        return name, load_prompt(name).render(question=question, answer=gold, response=response)

    def judge(
        self, question_type: str, question: str, gold: str, response: str, abstention: bool
    ) -> Judgement:
        name, prompt = self.prompt(question_type, question, gold, response, abstention)
        resp = self.llm.complete_sync(prompt, max_tokens=self.max_tokens, purpose="judge")
        return Judgement(correct=is_yes(resp.text), raw=resp.text.strip(), prompt_name=name, usage=resp.usage)


def is_yes(reply: str) -> bool:
    """The official rule: the reply contains "yes" (case-insensitive)."""
    return "yes" in reply.lower()
