"""Reading from memory: question analysis, the mode-aware Reader and its tools."""

from graphrecall.read.access import MemoryAccess
from graphrecall.read.classify import QuestionPlan, QuestionType, classify, classify_with_llm
from graphrecall.read.decompose import Decomposition, decompose
from graphrecall.read.models import Answer, Citation, StageStats, ToolTrace, VerifierJudgement
from graphrecall.read.reader import Reader

__all__ = [
    "Answer",
    "Citation",
    "Decomposition",
    "MemoryAccess",
    "QuestionPlan",
    "QuestionType",
    "Reader",
    "StageStats",
    "ToolTrace",
    "VerifierJudgement",
    "classify",
    "classify_with_llm",
    "decompose",
]
