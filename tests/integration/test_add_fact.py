"""Facts an application already knows: stored through extraction's write path, versioned like extracted facts
(the LLM decides when there is one; without one, the same or a near-identical fact of the same kind about the
same entities is matched), visible to facts(), search and the profile."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from graphrecall import InvalidInput, Memory, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.models import utcnow

SCOPE = ("acme", "dana")


@pytest.fixture
def m(tmp_path: Path) -> Iterator[Memory]:
    # Hashing vectors: "lives in Berlin" vs "lives in Berlin now" 0.77, vs "lives in Munich" 0.52.
    cfg = ExtractionConfig(known_fact_min_similarity=0.7, background=False)
    with Memory.open(tmp_path / "s", embedder=HashingEmbedder(64), extraction=cfg) as mem:
        yield mem


def test_a_new_fact_is_stored_with_its_entities_and_found_by_every_reader(m: Memory) -> None:
    before = utcnow()
    r = m.add_fact(
        SCOPE, "The user works at  Globex as a data engineer.", kind="attribute", entities=["Globex"]
    )
    assert (r.decision, r.decided_by, r.superseded) == ("NEW", "rule", None)
    f = r.fact
    assert f.text == "The user works at Globex as a data engineer."  # whitespace normalized
    assert (f.kind.value, f.session_id, f.message_ids, f.confidence) == ("attribute", "app", [], 1.0)
    assert f.recorded_at is not None and before <= f.recorded_at <= utcnow() and f.valid_from == f.recorded_at
    [globex] = m.entities(SCOPE)
    assert globex.name == "Globex" and f.entity_ids == [globex.id]
    assert [x.id for x in m.facts(SCOPE)] == [f.id]
    # the write went through the indexed COPY path: vector and full-text search both find it
    hits = m.search(SCOPE, "Globex data engineer", kinds=("fact",))
    assert [h.id for h in hits] == [f.id] and hits[0].session_id == "app"
    assert "Globex" in m.profile(SCOPE).text
    again = m.add_fact(SCOPE, "The user's manager is Ana.", kind="relationship", entities=["globex", "Ana"])
    assert again.fact.entity_ids == sorted(
        [globex.id, next(e.id for e in m.entities(SCOPE) if e.name == "Ana")]
    )
    assert len(m.entities(SCOPE)) == 2  # "globex" resolved onto the stored Globex


def test_the_same_fact_again_is_a_duplicate_that_reinforces(m: Memory) -> None:
    first = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", valid_from="2023-01-01")
    again = m.add_fact(SCOPE, "the user lives in Berlin", kind="attribute")
    assert (again.decision, again.decided_by) == ("DUPLICATE", "rule")
    assert again.fact.id == first.fact.id and again.fact.valid_from == datetime(2023, 1, 1)
    assert again.fact.last_seen is not None and first.fact.last_seen is not None
    assert again.fact.last_seen >= first.fact.last_seen
    assert (first.fact.reinforcement, again.fact.reinforcement) == (1, 2)
    assert len(m.facts(SCOPE, include_superseded=True)) == 1


def test_a_near_identical_fact_of_the_same_kind_and_entities_supersedes_the_old_one(m: Memory) -> None:
    old = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", valid_from="2023-01-01").fact
    r = m.add_fact(SCOPE, "The user lives in Berlin now.", kind="attribute", valid_from="2024-02-01")
    assert (r.decision, r.decided_by, r.superseded) == ("UPDATE", "rule", old.id)
    assert "near-identical" in r.reason
    assert [f.text for f in m.facts(SCOPE)] == ["The user lives in Berlin now."]
    was, now = m.history(SCOPE, r.fact.id)
    assert (was.id, was.superseded_by, was.valid_to) == (old.id, r.fact.id, datetime(2024, 2, 1))
    assert now.id == r.fact.id and now.current
    assert [f.text for f in m.facts(SCOPE, as_of="2023-06-01")] == ["The user lives in Berlin."]


def test_other_kinds_other_entities_and_different_facts_stay_new(m: Memory) -> None:
    m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute")
    assert m.add_fact(SCOPE, "The user lives in Munich.", kind="attribute").decision == "NEW"  # not similar
    assert m.add_fact(SCOPE, "The user lives in Berlin.", kind="plan").decision == "NEW"  # another kind
    assert (
        m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin"]).decision
        == "NEW"
    )
    assert len(m.facts(SCOPE)) == 4


def test_with_an_llm_the_versioning_decision_is_the_llms(tmp_path: Path) -> None:
    llm = ScriptedLLM(ordered=False)
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False)
    with Memory.open(tmp_path / "s", embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as m:
        old = m.add_fact(SCOPE, "The user lives in Munich.", kind="attribute")  # no candidate: no call
        assert (old.decision, old.decided_by, llm.calls) == ("NEW", "rule", [])
        llm.add("New facts, each followed", {"decisions": [
            {"fact": "n1", "decision": "UPDATE", "target": "c1", "reason": "the user moved"}]}, times=1)  # fmt: skip
        r = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute")
        assert (r.decision, r.decided_by, r.superseded) == ("UPDATE", "llm", old.fact.id)
        assert "c1: The user lives in Munich." in llm.calls[-1].prompt  # the extractor's versioning prompt
        assert [f.text for f in m.facts(SCOPE)] == ["The user lives in Berlin."]
        same = m.add_fact(SCOPE, "The user lives in Berlin", kind="attribute")  # same text: the rule, no call
        assert (same.decision, same.decided_by, len(llm.calls)) == ("DUPLICATE", "rule", 1)


def test_a_source_session_dates_the_fact_and_the_cutoff_applies(m: Memory) -> None:
    m.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="onboarding", date="2024-03-01")
    dated = m.add_fact(SCOPE, "The user is vegetarian.", kind="preference", source="onboarding").fact
    march = datetime(2024, 3, 1)
    assert (dated.session_id, dated.recorded_at, dated.valid_from) == ("onboarding", march, march)
    label = m.add_fact(SCOPE, "The user's plan is Pro.", kind="attribute", source="crm").fact
    assert label.session_id == "crm" and label.recorded_at is not None
    assert label.recorded_at > utcnow() - timedelta(minutes=5)
    # a question asked in April 2024 sees the onboarding fact, not one the CRM told us today
    past = m.profile(SCOPE, as_of="2024-04-01").text
    assert "vegetarian" in past and "Pro" not in past
    assert "Pro" in m.profile(SCOPE).text


def test_bad_arguments_are_named_and_nothing_is_written(m: Memory) -> None:
    for kwargs, where in (
        ({"text": "  "}, "text"),
        ({"text": "x", "kind": "mood"}, "kind"),
        ({"text": "x", "entities": "Ana"}, "entities"),
        ({"text": "x", "valid_from": "soonish"}, "valid_from"),
        ({"text": "x", "source": "../etc"}, "source"),
    ):
        with pytest.raises(InvalidInput) as e:
            m.add_fact(SCOPE, **kwargs)  # type: ignore[arg-type]
        assert e.value.where == where
    assert m.facts(SCOPE) == []


def test_rows_carry_everything_extraction_writes(m: Memory) -> None:
    f = m.add_fact(SCOPE, "The user has a dog called Rex.", kind="attribute", entities=["Rex"]).fact
    with testing.database(m, SCOPE) as db:
        [[terms, emb]] = db.query("MATCH (f:Fact {key: $k}) RETURN f.terms, f.embedding", {"k": db.key(f.id)})
        [[about]] = db.query(
            "MATCH (:Fact {key: $k})-[:ABOUT]->(e:Entity) RETURN e.name", {"k": db.key(f.id)}
        )
    assert "wrex" in terms.split() and len(emb) == 64 and about == "Rex"


@pytest.mark.slow
def test_the_default_threshold_tells_rewordings_from_changes_with_the_bundled_model(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "s") as m:
        m.add_fact(SCOPE, "The user is vegetarian.", kind="preference")
        assert m.add_fact(SCOPE, "The user is a vegetarian.", kind="preference").decision == "UPDATE"
        m.add_fact(SCOPE, "The user has two kids.", kind="attribute")
        assert m.add_fact(SCOPE, "The user has three kids.", kind="attribute").decision == "NEW"
