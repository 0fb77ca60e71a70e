"""Selective forgetting: erasing a session, a fact, everything before a date or everything matching some words
removes the raw messages, rounds, extracted facts and events, orphaned entities and their index entries, so that no
search, context, fact listing or export returns them, also after a reopen; a dry run deletes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory, NotFound, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.store import rounds as q
from graphrecall.text import query_terms

SCOPE = ("acme", "eve")

SESSIONS = {
    "s1": ("2024-01-05", "I adopted a beagle called Biscuit.", "Biscuit the beagle is the user's dog."),
    "s2": ("2024-02-10", "My sister Ana moved to Porto.", "Ana lives in Porto."),
    "s3": ("2024-03-15", "I started cello lessons with Mr Vega.", "The user takes cello lessons."),
}


def _open(root: Path) -> Memory:
    return Memory.open(
        root,
        embedder=HashingEmbedder(64),
        llm=ScriptedLLM(ordered=False),
        extraction=ExtractionConfig(background=False),
    )


def _fill(m: Memory) -> None:
    assert isinstance(m.llm, ScriptedLLM)
    for sid, (date, said, fact) in SESSIONS.items():
        m.llm.add(
            f"Session id: {sid}\n",
            {
                "facts": [
                    {"text": fact, "kind": "attribute", "message_ids": ["m1"], "about": [fact.split()[0]]}
                ],
                "events": [
                    {
                        "subject": "user",
                        "verb": "said",
                        "object": sid,
                        "text": f"The user said: {said}",
                        "message_ids": ["m1"],
                    }
                ],
                "entities": [{"name": fact.split()[0], "type": "thing"}],
                "relations": [],
            },
            times=1,
        )
        r = m.add_session(
            SCOPE,
            [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}],
            session_id=sid,
            date=date,
            extract=True,
        )
        assert r.extraction is not None and r.extraction.sessions_done == 1, r.extraction


def _everywhere(m: Memory, word: str) -> list[str]:
    """Where ``word`` still shows: search (rounds, facts, events), context, fact list, export, the indexes."""
    seen = []
    hits = m.search(SCOPE, word, k=20, kinds=["round", "fact", "event"])
    if any(word.lower() in h.text.lower() for h in hits):
        seen.append("search")
    if word.lower() in m.context(SCOPE, word).text.lower():
        seen.append("context")
    if any(word.lower() in f.text.lower() for f in m.facts(SCOPE, include_superseded=True)):
        seen.append("facts")
    if word.lower() in str(m.export_sessions(SCOPE)).lower():
        seen.append("export")
    with testing.database(m, SCOPE, create=False) as db:
        for index in ("round_terms", "fact_terms", "event_terms"):
            if q.lexical_search(db, index, query_terms(word), 5):
                seen.append(index)
    return seen


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_a_dry_run_lists_what_would_go_and_deletes_nothing(root: Path) -> None:
    with _open(root) as m:
        _fill(m)
        before = m.stats(SCOPE)
        plan = m.erase(SCOPE, session_ids=["s1"], dry_run=True)
        assert plan.dry_run and plan.sessions == ["s1"] and plan.rounds == ["s1@0"]
        assert sorted(plan.messages) == ["s1#0", "s1#1"] and len(plan.facts) == 1 and len(plan.events) == 1
        assert len(plan.entities) == 1  # "Biscuit": nothing else mentions it
        assert m.stats(SCOPE) == before and "search" in _everywhere(m, "Biscuit")


def test_an_erased_session_is_gone_from_every_read_also_after_a_reopen(root: Path) -> None:
    with _open(root) as m:
        _fill(m)
        assert _everywhere(m, "Biscuit")
        done = m.erase(SCOPE, session_ids=["s1"])
        assert not done.dry_run and done.sessions == ["s1"]
        assert _everywhere(m, "Biscuit") == []
        assert [s.id for s in m.sessions(SCOPE)] == ["s2", "s3"]
        assert "Porto" in m.context(SCOPE, "Where does Ana live?").text  # the rest is untouched
        # The same session id can be written again (nothing remembers it as stored).
        m.add_session(
            SCOPE, [{"role": "user", "content": "A new first session about kites."}], session_id="s1"
        )
        assert [h.session_id for h in m.search(SCOPE, "kites", k=1)] == ["s1"]
    with _open(root) as m:
        assert _everywhere(m, "Biscuit") == []
        with testing.database(m, SCOPE, create=False) as db:
            assert db.indexes.rebuilt == []  # the indexes followed the erase; nothing to repair


def test_erase_by_words_by_fact_and_before_a_date(root: Path) -> None:
    with _open(root) as m:
        _fill(m)
        by_words = m.erase(SCOPE, matching="Porto")
        assert by_words.rounds == ["s2@0"] and by_words.sessions == ["s2"]  # its only round: the session goes
        assert _everywhere(m, "Porto") == []
        (cello,) = [f for f in m.facts(SCOPE) if "cello" in f.text]
        assert m.erase(SCOPE, fact_ids=[cello.id]).facts == [cello.id]
        assert not any("cello" in f.text for f in m.facts(SCOPE))
        assert [s.id for s in m.sessions(SCOPE)] == ["s1", "s3"]  # erasing a fact keeps what was said
        early = m.erase(SCOPE, before="2024-02-01")
        assert early.sessions == ["s1"] and _everywhere(m, "Biscuit") == []
        assert [s.id for s in m.sessions(SCOPE)] == ["s3"]


def test_bad_requests_are_refused_before_anything_is_deleted(root: Path) -> None:
    with _open(root) as m:
        _fill(m)
        before = m.stats(SCOPE)
        with pytest.raises(NotFound, match="nope"):
            m.erase(SCOPE, session_ids=["s1", "nope"])
        with pytest.raises(InvalidInput, match="say what to erase"):
            m.erase(SCOPE)
        with pytest.raises(InvalidInput, match="no words"):
            m.erase(SCOPE, matching="?!")
        with pytest.raises(InvalidInput, match="before"):
            m.erase(SCOPE, before="not a date")
        assert m.stats(SCOPE) == before
        with pytest.raises(NotFound):
            m.erase(("acme", "nobody"), session_ids=["s1"])


def test_an_unflushed_write_is_erased_too(root: Path, monkeypatch: Any) -> None:
    with _open(root) as m:
        m.add_session(SCOPE, [{"role": "user", "content": "My locker code is 4711."}], session_id="t1")
        assert m.erase(SCOPE, matching="locker code").sessions == ["t1"]
        assert m.search(SCOPE, "locker code 4711", k=5) == []
