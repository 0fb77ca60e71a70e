"""Retrieval: time parsing, candidate generators, fusion, reranking and context assembly."""

from graphrecall.retrieve.context import build_context, estimate_tokens
from graphrecall.retrieve.fusion import rrf, weighted
from graphrecall.retrieve.rerank import CrossEncoderReranker, Reranker, load_reranker
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.retrieve.timeparse import parse_time_range

__all__ = [
    "CrossEncoderReranker",
    "HybridRetriever",
    "Reranker",
    "build_context",
    "estimate_tokens",
    "load_reranker",
    "parse_time_range",
    "rrf",
    "weighted",
]
