"""Embedders: the protocol, the offline sentence-transformers default, a content-hash cache, a test embedder."""

from graphrecall.embed.base import Embedder, TextKind, Vectors, normalize_rows
from graphrecall.embed.batching import BatchingEmbedder
from graphrecall.embed.cache import CachedEmbedder
from graphrecall.embed.hashing import HashingEmbedder
from graphrecall.embed.sentence import SentenceTransformerEmbedder, bundled_model_path


def default_embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2 (offline) behind an in-memory content-hash cache."""
    return CachedEmbedder(SentenceTransformerEmbedder())


__all__ = [
    "BatchingEmbedder",
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "TextKind",
    "Vectors",
    "bundled_model_path",
    "default_embedder",
    "normalize_rows",
]
