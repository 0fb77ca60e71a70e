"""Embedders: the protocol, the offline sentence-transformers default, a content-hash cache, a test embedder."""

from graphrecall.embed.base import Embedder, TextKind, Vectors, normalize_rows
from graphrecall.embed.batching import BatchingEmbedder
from graphrecall.embed.cache import CachedEmbedder
from graphrecall.embed.hashing import HashingEmbedder
from graphrecall.embed.sentence import SentenceTransformerEmbedder, bundled_model_path
from graphrecall.embed.spec import embedder_from_spec


def default_embedder(spec: str | None = None) -> Embedder:
    """The embedder ``spec`` names (``embed.spec``; ``None``: ``GRAPHRECALL_EMBEDDER``, else the bundled MiniLM)
    behind an in-memory content-hash cache."""
    return CachedEmbedder(embedder_from_spec(spec))


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
    "embedder_from_spec",
    "normalize_rows",
]
