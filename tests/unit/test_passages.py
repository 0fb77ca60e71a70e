"""Long texts are embedded in full: short passages, each kept and pooled; short texts exactly as before."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.embed import CachedEmbedder, HashingEmbedder
from graphrecall.embed.base import TextKind, Vectors, normalize_rows
from graphrecall.embed.passages import (
    CHARS_PER_TOKEN,
    MAX_PASSAGES,
    MAX_WINDOWS,
    PASSAGE_FROM_CHARS,
    PASSAGE_MAX_CHARS,
    embed_in_full,
    embed_passages,
    passage_chars,
    split_passages,
    spread,
)


class WindowedEmbedder:
    """A hashing embedder that, like a transformer, reads only its first ``max_tokens`` words; counts its calls."""

    def __init__(self, max_tokens: int = 12) -> None:
        self.inner = HashingEmbedder(64)
        self.max_tokens = max_tokens
        self.calls: list[list[str]] = []

    @property
    def id(self) -> str:
        return "windowed"

    @property
    def dim(self) -> int:
        return 64

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.calls.append(list(texts))
        return self.inner.embed([" ".join(t.split()[: self.max_tokens]) for t in texts], kind=kind)


texts = st.text(alphabet=st.sampled_from("ab c.\n!?"), max_size=400)


@given(texts, st.integers(min_value=1, max_value=60))
def test_passages_fit_and_keep_every_character_in_order(text: str, limit: int) -> None:
    passages = split_passages(text, limit)
    assert all(0 < len(p) <= limit for p in passages)
    assert "".join("".join(passages).split()) == "".join(text.split())


def test_passages_break_at_sentence_ends_where_they_can() -> None:
    text = "First sentence here. Second one is here too. Third."
    assert split_passages(text, 25) == ["First sentence here.", "Second one is here too.", "Third."]
    assert split_passages(text, 200) == [text]
    assert split_passages("   ", 10) == []


@given(st.lists(st.integers(), min_size=1, max_size=300), st.integers(min_value=1, max_value=70))
def test_spread_keeps_at_most_limit_in_order_from_first_to_last(items: list[int], limit: int) -> None:
    passages = [str(i) for i in range(len(items))]
    kept = spread(passages, limit)
    assert len(kept) == min(limit, len(passages))
    assert kept[0] == passages[0] and [int(p) for p in kept] == sorted(int(p) for p in kept)
    if limit > 1:
        assert kept[-1] == passages[-1]


def test_window_is_read_through_wrappers_and_absent_for_embedders_without_one() -> None:
    assert passage_chars(CachedEmbedder(WindowedEmbedder(max_tokens=256))) == 254 * CHARS_PER_TOKEN
    assert passage_chars(HashingEmbedder(64)) is None


def test_short_texts_are_embedded_exactly_as_before_in_one_call() -> None:
    model = WindowedEmbedder(max_tokens=100)
    vecs = embed_in_full(model, ["tiny", "also short"])
    np.testing.assert_allclose(vecs, model.inner.embed(["tiny", "also short"]))
    assert len(model.calls) == 1


def test_a_long_text_is_the_pooled_vector_of_its_passages_and_its_tail_counts() -> None:
    model = WindowedEmbedder(max_tokens=12)  # passages of (12 - 2) * 3 = 30 characters
    long = "My cat is called Miso. " * 6 + "The invoice INV-88213 is unpaid."
    [vec] = embed_in_full(model, [long])
    [call] = model.calls
    assert len(call) > 1 and "INV-88213" in " ".join(call[-2:])  # every passage, in one batched call
    expected = normalize_rows(model.inner.embed(call).mean(axis=0))[0]
    np.testing.assert_allclose(vec, expected, atol=1e-6)
    tail = model.inner.embed(["The invoice INV-88213 is unpaid."])[0]
    cut = model.inner.embed([" ".join(long.split()[:12])])[0]  # what a window alone would have read
    assert float(vec @ tail) > float(cut @ tail) + 0.1


def test_a_text_past_the_cap_embeds_max_passages_spread_over_it() -> None:
    model = WindowedEmbedder(max_tokens=12)
    long = " ".join(f"Sentence number {i}." for i in range(400))
    embed_in_full(model, [long, "short"])
    [call] = model.calls
    assert len(call) == MAX_WINDOWS + 1 and call[-1] == "short"
    assert call[0].startswith("Sentence number 0.") and call[MAX_WINDOWS - 1].endswith("Sentence number 399.")


@pytest.mark.parametrize("kind", ["document", "query"])
def test_kind_is_passed_through(kind: TextKind) -> None:
    model = WindowedEmbedder(max_tokens=12)
    assert embed_in_full(model, ["word " * 50], kind=kind).shape == (1, 64)


def test_embed_passages_keeps_each_passage_of_a_long_text_and_none_for_a_short_one() -> None:
    model = WindowedEmbedder(max_tokens=12)
    long = "My cat is called Miso. " * 6 + "The invoice INV-88213 is unpaid."
    pooled, [parts, none] = embed_passages(model, [long, "short"])
    [call] = model.calls
    assert none is None and parts is not None and len(parts) == len(call) - 1
    np.testing.assert_allclose(np.linalg.norm(parts, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(parts, normalize_rows(model.inner.embed(call[:-1])), atol=1e-6)
    np.testing.assert_allclose(pooled[0], embed_in_full(model, [long])[0], atol=1e-6)


def test_passages_are_short_even_when_the_window_is_long() -> None:
    model = WindowedEmbedder(max_tokens=512)  # a window of ~1,500 characters
    long = " ".join(f"Sentence number {i} says something." for i in range(100))
    pooled, [parts] = embed_passages(model, [long])
    [call] = model.calls
    windows = [t for t in call if len(t) > PASSAGE_MAX_CHARS]
    passages = call[len(windows) :]
    assert len(windows) == 3 and " ".join(windows) == long  # the vector: the mean of the windows'
    np.testing.assert_allclose(pooled[0], embed_in_full(model, [long])[0], atol=1e-6)
    assert parts is not None and len(parts) == len(passages) > 20
    assert all(len(p) <= PASSAGE_MAX_CHARS for p in passages) and " ".join(passages) == long


def test_a_text_past_the_cap_keeps_max_passages_spread_over_it() -> None:
    model = WindowedEmbedder(max_tokens=512)
    long = " ".join(f"Sentence number {i} is here." for i in range(1000))
    _, [parts] = embed_passages(model, [long])
    assert parts is not None and len(parts) == MAX_PASSAGES


def test_a_text_the_model_reads_whole_gets_passages_from_the_threshold_on() -> None:
    model = WindowedEmbedder(max_tokens=512)  # a window of ~1,500 characters
    medium = " ".join(f"Sentence number {i} says something." for i in range(12))  # ~430 characters
    assert PASSAGE_FROM_CHARS < len(medium) < 1500
    [vec], [parts] = embed_passages(model, [medium])
    [call] = model.calls
    assert call[0] == medium and parts is not None and len(parts) == len(call) - 1 > 1
    np.testing.assert_allclose(vec, model.inner.embed([medium])[0], atol=1e-6)  # its own vector, whole
    _, [none] = embed_passages(model, [medium], from_chars=len(medium))
    assert none is None and model.calls[-1] == [medium]
    assert embed_in_full(model, [medium]).shape == (1, 64) and model.calls[-1] == [medium]


def test_the_cli_guide_states_the_passage_limit_the_code_has() -> None:
    """docs/cli.md once said 64 passages where the code kept 128: the figures are read from the code here."""
    from pathlib import Path

    from graphrecall.embed.passages import CHARS_PER_TOKEN, MAX_PASSAGES, PASSAGE_MAX_CHARS

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text().split())
    minilm_chars = min((256 - 2) * CHARS_PER_TOKEN, PASSAGE_MAX_CHARS) * MAX_PASSAGES  # MiniLM: 256 tokens
    assert f"longer than {MAX_PASSAGES} passages (~{minilm_chars:,} characters" in text
    assert f"represented by {MAX_PASSAGES} passages" in text
