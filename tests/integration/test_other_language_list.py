"""A question gets a list of the dense candidates written in another language than its own
(``RetrievalConfig.other_language_weight``): the vote that the BM25 lists give a round in the question's language and
cannot give one in another script, so that an answer in the other language is not outvoted by a same-language round
on a nearby topic. A scope in the question's language alone has no such candidate: its ranking does not move.

Real Kuzu and the write log's tail; the feature-hashing embedder (similarity is shared words: "Priya" is the one the
Russian answer shares with the English question). ``small_store_rounds=0``: two rounds would otherwise scale the
lexical lists and this one down to nearly nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from graphrecall import Memory, RetrievalConfig, Scope, Settings
from graphrecall.embed.hashing import HashingEmbedder
from graphrecall.retrieve.lists import other_language

SCOPE = Scope(org_id="acme", user_id="flatmates")
QUESTION = "where does Priya work"
ASKED = "2024-05-15"
ENGLISH = ("en", "2024-03-02", "Priya says work was long today, Priya cooked dinner for us")
RUSSIAN = ("ru", "2024-04-06", "Прия теперь работает в больнице, Priya очень довольна")
ENGLISH_TOO = ("en2", "2024-04-06", "Priya started at the hospital, she is happy there")
Opener = Callable[..., Memory]


def _turns(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Nice."}]


def _ranked(m: Memory) -> list[tuple[str | None, float, dict[str, float]]]:
    return [(h.session_id, h.score, h.signals) for h in m.search(SCOPE, QUESTION, 5, question_date=ASKED)]


@pytest.fixture
def open_memory(tmp_path: Path) -> Iterator[Opener]:
    opened: list[Memory] = []

    def _open(name: str, sessions: tuple[tuple[str, str, str], ...], **overrides: float) -> Memory:
        root = tmp_path / name
        cfg = RetrievalConfig(small_store_rounds=0, **overrides)
        m = Memory.open(root, embedder=HashingEmbedder(256), settings=Settings(root=root), retrieval=cfg)
        opened.append(m)
        for sid, date, text in sessions:
            m.add_session(SCOPE, _turns(text), session_id=sid, date=date)
        return m

    yield _open
    for m in opened:
        m.close()


def test_other_language() -> None:
    assert other_language("en", "Я теперь живу в Казани")  # another script
    assert other_language("ru", "I moved to Kazan last spring")
    assert other_language("en", "我现在住在成都")
    assert other_language("en", "Ich wohne jetzt mit meiner Frau in München")  # recognized as German
    assert not other_language("de", "Ich wohne jetzt mit meiner Frau in München")
    assert not other_language("zh", "我现在住在成都")
    assert not other_language("en", "I moved to Berlin with my wife last year")
    # a text that switches languages is the question's as language_of reads it (Cyrillic against Latin words)
    assert not other_language("ru", "my cat Кекс threw up on the carpet again, это уже третий раз за неделю")
    # a Latin text the detector cannot place reads as English: never another language to a Latin question
    assert not other_language("es", "Sí, claro")
    assert not other_language("de", "ok thanks")


@pytest.mark.parametrize("flushed", [False, True])
def test_the_answer_in_the_other_language_gets_the_lexical_lists_vote(
    open_memory: Opener, flushed: bool
) -> None:
    off = open_memory(f"off-{flushed}", (ENGLISH, RUSSIAN), other_language_weight=0.0)
    on = open_memory(f"on-{flushed}", (ENGLISH, RUSSIAN), other_language_weight=1.7)
    if flushed:
        off.flush()
        on.flush()
    assert [sid for sid, _, _ in _ranked(off)] == ["en", "ru"]  # BM25 reaches the English round only
    ranked = _ranked(on)
    assert [sid for sid, _, _ in ranked] == ["ru", "en"]
    signals = {sid: sig for sid, _, sig in ranked}
    assert signals["ru"]["other_language"] > 0 and "other_language" not in signals["en"]


def test_a_few_rounds_in_another_language_get_no_list(open_memory: Opener) -> None:
    """One Russian round among three: a third of the candidates, below a min share of a half."""
    sessions = (ENGLISH, RUSSIAN, ENGLISH_TOO)
    off = open_memory("few-off", sessions, other_language_weight=0.0)
    gated = open_memory("few-gated", sessions, other_language_weight=1.7, other_language_min_share=0.5)
    taken = open_memory("few-taken", sessions, other_language_weight=1.7, other_language_min_share=0.3)
    assert _ranked(gated) == _ranked(off)
    assert any("other_language" in sig for _, _, sig in _ranked(taken))


def test_a_scope_in_the_questions_language_does_not_move(open_memory: Opener) -> None:
    off = open_memory("en-off", (ENGLISH, ENGLISH_TOO), other_language_weight=0.0)
    on = open_memory("en-on", (ENGLISH, ENGLISH_TOO), other_language_weight=1.7)
    off.flush()
    on.flush()
    assert _ranked(on) == _ranked(off)
    assert all("other_language" not in sig for _, _, sig in _ranked(on))
