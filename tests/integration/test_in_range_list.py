"""A question anchored in time gets a list of the rounds inside its range, ranked by similarity among themselves
(``RetrievalConfig.in_range_weight``): the best match inside the range is found although the whole scope's vector
and BM25 lists rank rounds outside the range above it, too far up for the flat time boost to reach it.

Real Kuzu and the write log's tail; the feature-hashing embedder (similarity here is shared words, which is all the
scenario needs). ``candidates=2`` stands in for a large scope: each list holds only its two best rounds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from graphrecall import Memory, RetrievalConfig, Scope, Settings
from graphrecall.embed.hashing import HashingEmbedder

SCOPE = Scope(org_id="acme", user_id="hiker")
QUESTION = "which trail did I hike last weekend"
ASKED = "2024-05-15"  # a Wednesday: last weekend is May 11-12
# Out of the range, and closer to the question in words than the answer is.
OLD = {
    "jan": ("2024-01-06", "which trail should I hike next, I love to hike"),
    "feb": ("2024-02-10", "I want to hike a trail, which one should I hike"),
    "mar": ("2024-03-09", "which hike trail is best, I hike every month"),
}
Opener = Callable[..., Memory]
ANSWER = ("may", "2024-05-11", "Sam and I did the Ridge trail on Saturday, muddy but fun")


def _turns(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Nice."}]


def _ranked(m: Memory) -> list[tuple[str | None, dict[str, float]]]:
    hits = m.search(SCOPE, QUESTION, 2, question_date=ASKED)
    return [(h.session_id, h.signals) for h in hits]


@pytest.fixture
def open_memory(tmp_path: Path) -> Iterator[Opener]:
    opened: list[Memory] = []

    def _open(name: str, **overrides: float) -> Memory:
        root = tmp_path / name
        cfg = RetrievalConfig(candidates=2, **overrides)
        m = Memory.open(root, embedder=HashingEmbedder(256), settings=Settings(root=root), retrieval=cfg)
        opened.append(m)
        for sid, (date, text) in OLD.items():
            m.add_session(SCOPE, _turns(text), session_id=sid, date=date)
        sid, date, text = ANSWER
        m.add_session(SCOPE, _turns(text), session_id=sid, date=date)
        return m

    yield _open
    for m in opened:
        m.close()


def test_without_the_list_the_answer_inside_the_range_is_not_found(open_memory: Opener) -> None:
    m = open_memory("off", in_range_weight=0.0)
    m.flush()
    assert "may" not in [sid for sid, _ in _ranked(m)]


def test_with_the_list_the_best_round_inside_the_range_is_found(open_memory: Opener) -> None:
    m = open_memory("on", in_range_weight=2.0)
    m.flush()
    found = dict(_ranked(m))
    assert "may" in found
    assert found["may"]["in_range"] > 0 and found["may"]["time"] == 1.0
    assert all("in_range" not in signals for sid, signals in found.items() if sid != "may")


def test_unflushed_rounds_are_in_the_list_as_well(open_memory: Opener) -> None:
    tail = open_memory("tail", in_range_weight=2.0)  # nothing flushed: every round is in the write log's tail
    flushed = open_memory("flushed", in_range_weight=2.0)
    flushed.flush()
    assert [sid for sid, _ in _ranked(tail)] == [sid for sid, _ in _ranked(flushed)]
    assert "may" in [sid for sid, _ in _ranked(tail)]


def test_a_question_without_a_time_expression_gets_no_list(open_memory: Opener) -> None:
    m = open_memory("plain", in_range_weight=2.0)
    hits = m.search(SCOPE, "which trail did I hike", 4, question_date=ASKED)
    assert hits and all("in_range" not in h.signals and "time" not in h.signals for h in hits)
