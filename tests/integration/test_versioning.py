"""Fact versioning: NEW / DUPLICATE / UPDATE / CONTRADICT, manual supersede, as_of, history, search."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory, NotFound, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.store.schema import MATCH_SCOPE, owned

SCOPE = ("acme", "bob")
VERSION = "New facts, each followed"


def answer(*facts: str, when: str | None = None) -> dict[str, Any]:
    return {"facts": [{"text": t, "kind": "attribute", "message_ids": ["m1"], "when": when} for t in facts]}


def mem(tmp_path: Path) -> Memory:
    # Hashing vectors: "lives in Munich" vs "lives in Berlin" share about half their features.
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False)
    return Memory.open(
        tmp_path / "s", embedder=HashingEmbedder(64), llm=ScriptedLLM(ordered=False), extraction=cfg
    )


def say(
    m: Memory,
    sid: str,
    date: str,
    *facts: str,
    versions: dict[str, Any] | None = None,
    when: str | None = None,
) -> Any:
    assert isinstance(m.llm, ScriptedLLM)
    m.llm.add(f"Session id: {sid}\n", answer(*facts, when=when), times=1)
    if versions is not None:
        m.llm.add(VERSION, versions, times=1)
    r = m.add_session(
        SCOPE, [{"role": "user", "content": " ".join(facts)}], session_id=sid, date=date, extract=True
    )
    assert r.extraction is not None and r.extraction.sessions_done == 1, r.extraction
    return r.extraction


def decision(d: str, target: str | None = "c1", fact: str = "n1") -> dict[str, Any]:
    return {"decisions": [{"fact": fact, "decision": d, "target": target, "reason": "test"}]}


def test_new_keeps_both_facts_current(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        r = say(m, "s2", "2024-02-10", "The user lives with a cat", versions=decision("NEW", None))
        assert (r.facts_added, r.facts_superseded, r.llm_calls) == (1, 0, 2)
        assert len(m.facts(SCOPE)) == 2


def test_duplicate_reinforces_the_stored_fact_without_a_new_row(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        with testing.database(m, m.scopes()[0], create=False) as db:
            db_conf = 0.5
            with db.write() as txn:
                txn.execute(f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} SET f.confidence = $c", {"c": db_conf})
        r = say(m, "s2", "2024-02-10", "The user resides in Munich", versions=decision("DUPLICATE"))
        (f,) = m.facts(SCOPE, include_superseded=True)
        assert (r.facts_added, r.facts_reinforced) == (0, 1)
        assert f.confidence > db_conf and f.last_seen == datetime(2024, 2, 10)
        assert f.message_ids == ["s1#0", "s2#0"] and f.text == "The user lives in Munich"
        assert f.reinforcement == 2  # observed twice: the count salience grows with


def test_an_identical_restatement_is_a_duplicate_without_asking_the_llm(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        r = say(m, "s2", "2024-02-10", "the user lives in Munich.")
        assert (r.facts_added, r.facts_reinforced, r.llm_calls) == (0, 1, 1)


@pytest.mark.parametrize("kind", ["UPDATE", "CONTRADICT"])
def test_update_and_contradict_supersede_the_old_fact_without_deleting_it(tmp_path: Path, kind: str) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        r = say(m, "s2", "2024-05-10", "The user lives in Berlin", versions=decision(kind), when="last month")
        assert (r.facts_added, r.facts_superseded) == (1, 1)
        (current,) = m.facts(SCOPE)
        assert current.text == "The user lives in Berlin" and current.valid_from == datetime(2024, 4, 1)
        old, new = m.facts(SCOPE, include_superseded=True)
        assert old.text == "The user lives in Munich" and old.superseded_by == new.id
        assert old.valid_to == new.valid_from and old.expired_at is not None and not old.current
        with testing.database(m, m.scopes()[0], create=False) as db:
            (reason,) = db.query(
                f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')}-[s:SUPERSEDES]->(:Fact) RETURN s.reason"
            )[0]
        assert reason.startswith(kind.lower())
        # valid time: what was true when
        assert [f.text for f in m.facts(SCOPE, as_of="2024-02-01")] == ["The user lives in Munich"]
        assert [f.text for f in m.facts(SCOPE, as_of="2024-04-15")] == ["The user lives in Berlin"]
        assert m.facts(SCOPE, as_of="2023-12-31") == []
        assert [f.id for f in m.history(SCOPE, new.id)] == [old.id, new.id]
        assert [f.id for f in m.history(SCOPE, old.id)] == [old.id, new.id]


def test_a_decision_naming_an_unknown_target_is_stored_as_new(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        r = say(m, "s2", "2024-02-10", "The user lives in Berlin", versions=decision("UPDATE", "c99"))
        assert (r.facts_added, r.facts_superseded) == (1, 0)
        assert len(m.facts(SCOPE)) == 2


def test_one_versioning_call_covers_every_new_fact_of_a_session(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich", "The user works at Siemens")
        both = {"decisions": [
            {"fact": "n1", "decision": "UPDATE", "target": "c1"},
            {"fact": "n2", "decision": "UPDATE", "target": "c2"},
        ]}  # fmt: skip
        r = say(m, "s2", "2024-03-10", "The user lives in Berlin", "The user works at Bosch", versions=both)
        assert (r.llm_calls, r.facts_superseded) == (2, 2)
        (call,) = [c for c in m.llm.calls if VERSION in c.prompt]  # type: ignore[union-attr]
        assert "n1: The user lives in Berlin" in call.prompt and "n2: The user works at Bosch" in call.prompt
        assert {f.text for f in m.facts(SCOPE)} == {"The user lives in Berlin", "The user works at Bosch"}


def test_search_skips_superseded_facts_unless_as_of_asks_for_the_past(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user lives in Munich")
        say(m, "s2", "2024-05-10", "The user lives in Berlin", versions=decision("UPDATE"))
        now = m.search(SCOPE, "where does the user live Munich", k=5, kinds=("fact",))
        assert [h.text for h in now] == ["The user lives in Berlin"]
        then = m.search(
            SCOPE, "where does the user live Munich", k=5, kinds=("fact",), as_of=datetime(2024, 2, 1)
        )
        assert [h.text for h in then] == ["The user lives in Munich"]
        rounds = m.search(SCOPE, "Munich", k=5)
        by_id = {h.id: h for h in rounds}
        assert "fact" not in by_id["s1@0"].signals  # its fact is superseded: no fact signal for that round


def test_manual_supersede_and_its_errors(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        say(m, "s1", "2024-01-10", "The user drives a Volvo")
        say(m, "s2", "2024-03-10", "The user rides a bicycle to work", versions=decision("NEW", None))
        a, b = m.facts(SCOPE)
        with pytest.raises(InvalidInput, match="itself"):
            m.supersede(SCOPE, a.id, a.id)
        with pytest.raises(NotFound, match="nope"):
            m.supersede(SCOPE, a.id, "nope")
        old = m.supersede(SCOPE, a.id, b.id, reason="sold the car")
        assert old.superseded_by == b.id and old.valid_to == b.valid_from and old.expired_at is not None
        with pytest.raises(InvalidInput, match="already superseded"):
            m.supersede(SCOPE, a.id, b.id)
        with pytest.raises(InvalidInput, match="itself superseded"):
            m.supersede(SCOPE, b.id, a.id)
        assert [f.id for f in m.facts(SCOPE)] == [b.id]
        assert len(m.facts(SCOPE, include_superseded=True)) == 2  # nothing deleted
        with pytest.raises(NotFound):
            m.history(SCOPE, "nope")
        assert m.history(SCOPE, b.id)[-1].superseded_by is None


def test_facts_pagination_and_arguments(tmp_path: Path) -> None:
    with mem(tmp_path) as m:
        assert m.facts(SCOPE) == []  # unknown scope: nothing, no error
        say(
            m, "s1", "2024-01-10", "The user drives a Volvo", "The user plays golf", "The user has three kids"
        )
        every = m.facts(SCOPE)
        assert [f.id for f in m.facts(SCOPE, limit=2)] + [f.id for f in m.facts(SCOPE, offset=2)] == [
            f.id for f in every
        ]
        with pytest.raises(InvalidInput):
            m.facts(SCOPE, limit=0)
        with pytest.raises(InvalidInput, match="as_of"):
            m.facts(SCOPE, as_of="last tuesday")
