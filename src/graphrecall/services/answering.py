"""Answering from memory: the Reader over one question's view of a scope.

The model is the one passed for this question, else the Memory's, else the one ``GRAPHRECALL_LLM`` names (built
on first use, so a store opened without an LLM still answers everything that needs none).
"""

from __future__ import annotations

from graphrecall.llm import LLM
from graphrecall.params import AnswerParams
from graphrecall.read import Reader
from graphrecall.read.models import Answer
from graphrecall.recall import ScopeRecall
from graphrecall.services.knowledge import KnowledgeService, needs_llm


class AnsweringService:
    def __init__(self, knowledge: KnowledgeService) -> None:
        self.knowledge = knowledge

    def model(self, llm: LLM | None) -> LLM:
        from graphrecall.llm import LLMNotConfigured, llm_from_settings

        if llm is not None:
            return llm
        if self.knowledge.llm is not None:
            return self.knowledge.llm
        try:
            return llm_from_settings()
        except LLMNotConfigured:
            raise needs_llm("answering needs an LLM") from None

    def answer(self, view: ScopeRecall, p: AnswerParams, llm: LLM | None = None) -> Answer:
        reader = Reader(
            self.model(llm),
            p.mode,
            max_tool_steps=p.max_tool_steps,
            tools=p.tools,
            token_budget=p.token_budget,
        )
        return reader.answer(view, p.question)
