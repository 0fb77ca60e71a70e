"""Consolidation on a real Kuzu store with a scripted LLM: each decision (rule merge, LLM merge keeping a fact, LLM
merge with new wording, kept separate), event links, period summaries, idempotence and the dry run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, NotAvailable
from graphrecall.config import ConsolidationConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM

SCOPE = ("acme", "cora")
MERGE_PROMPT = "You tidy an assistant's long-term memory"
SUMMARY_PROMPT = "Write ONE short paragraph"
# Hashing vectors: the chess pair 0.778, the dog pair 0.714, Berlin / Berlin now 0.775, unrelated facts < 0.3.
CONSOLIDATION = ConsolidationConfig(min_similarity=0.7, near_exact_similarity=0.75)


def open_memory(root: Path, llm: ScriptedLLM | None = None) -> Memory:
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False, known_fact_min_similarity=0.99)
    return Memory.open(
        root, embedder=HashingEmbedder(64), llm=llm, extraction=cfg, consolidation=CONSOLIDATION
    )


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM(ordered=False)


@pytest.fixture
def m(tmp_path: Path, llm: ScriptedLLM) -> Iterator[Memory]:
    with open_memory(tmp_path / "s", llm) as mem:
        yield mem


def say(m: Memory, sid: str, date: str, text: str, *, facts: list[str] = (), **extra: Any) -> None:  # type: ignore[assignment]
    """One user turn, extracted by the scripted model into ``facts`` (and ``extra``: events, entities); a
    versioning question, when similar facts exist, is answered NEW (the model missed the duplicate)."""
    assert isinstance(m.llm, ScriptedLLM)
    answer = {"facts": [{"text": t, "kind": "attribute", "message_ids": ["m1"]} for t in facts], **extra}
    m.llm.add(f"Session id: {sid}\n", answer, times=1)
    new = [{"fact": f"n{i + 1}", "decision": "NEW", "target": None, "reason": "t"} for i in range(len(facts))]
    m.llm.add("New facts, each followed", {"decisions": new}, times=1)
    r = m.add_session(SCOPE, [{"role": "user", "content": text}], session_id=sid, date=date, extract=True)
    assert r.extraction is not None and r.extraction.sessions_done == 1, r.extraction
    m.llm.steps = [
        s for s in m.llm.steps if s.times is None or s.used < s.times
    ]  # unused versioning rules go


def chess_and_dogs(m: Memory) -> None:
    say(m, "s1", "2024-01-10", "I play chess every Sunday and have a dog, Rex.",
        facts=["The user plays chess every Sunday.", "The user has a dog named Rex."])  # fmt: skip
    say(m, "s2", "2024-02-10", "Chess on Sundays, as always. And we got a second dog, Max.",
        facts=["The user plays chess on Sundays.", "The user has a dog named Max."])  # fmt: skip


def current(m: Memory) -> dict[str, Any]:
    return {f.text: f for f in m.facts(SCOPE)}


def snapshot(m: Memory) -> dict[str, Any]:
    doc = m.export_scope(SCOPE).model_dump(mode="json")
    doc.pop("exported_at")
    return doc


def merge_answer(keep: str, text: str | None = None) -> dict[str, Any]:
    return {"decision": "MERGE", "keep": keep, "text": text, "reason": "same habit"}


SEPARATE = {"decision": "SEPARATE", "keep": None, "text": None, "reason": "two dogs"}


def test_llm_merge_keeps_the_chosen_fact_and_keeps_different_facts_apart(m: Memory, llm: ScriptedLLM) -> None:
    chess_and_dogs(m)
    assert len(m.facts(SCOPE)) == 4
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "chess" in msgs[-1].content, merge_answer("f2"))
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "Rex" in msgs[-1].content, SEPARATE)

    r = m.consolidate(SCOPE)

    assert (r.llm_calls, r.dry_run, r.deferred, r.errors) == (2, False, 0, [])  # one call per cluster
    assert r.input_tokens > 0 and r.output_tokens > 0
    [merge] = r.merges
    texts = current(m)
    kept = texts[merge.text]
    assert merge.decided_by == "llm" and not merge.new_fact and kept.id == merge.kept_id
    assert set(texts) == {merge.text, "The user has a dog named Rex.", "The user has a dog named Max."}
    [gone] = merge.superseded
    assert kept.reinforcement == merge.reinforcement == 2  # the evidence summed
    assert sorted(kept.message_ids) == ["s1#0", "s2#0"]  # every source linked to the kept fact
    assert [f.id for f in m.history(SCOPE, kept.id)][-1] == kept.id and gone in {
        f.id for f in m.history(SCOPE, kept.id)
    }
    old = next(f for f in m.facts(SCOPE, include_superseded=True) if f.id == gone)
    assert old.superseded_by == kept.id and "consolidate" not in old.text  # versioned, not deleted
    [separate] = r.kept_separate
    assert {texts["The user has a dog named Rex."].id, texts["The user has a dog named Max."].id} == set(
        separate.fact_ids
    )
    # The profile counts the kept fact as said in two sessions; as of before s2 only s1's fact existed.
    assert [f.text for f in m.facts(SCOPE, as_of="2024-01-20") if "chess" in f.text] == [kept.text]


def test_llm_merge_with_new_wording_writes_a_fact_that_supersedes_the_cluster(
    m: Memory, llm: ScriptedLLM
) -> None:
    chess_and_dogs(m)
    llm.add(
        lambda msgs: MERGE_PROMPT in msgs[-1].content and "chess" in msgs[-1].content,
        merge_answer("f1", "The user plays chess every Sunday, a long-standing habit."),
    )
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "Rex" in msgs[-1].content, SEPARATE)

    r = m.consolidate(SCOPE)

    [merge] = r.merges
    assert merge.new_fact and len(merge.superseded) == 2
    new = current(m)["The user plays chess every Sunday, a long-standing habit."]
    assert new.id == merge.kept_id and new.reinforcement == 2 and sorted(new.message_ids) == ["s1#0", "s2#0"]
    assert {f.id for f in m.history(SCOPE, new.id)} == {new.id, *merge.superseded}
    hits = m.search(SCOPE, "long-standing chess habit", kinds=("fact",))
    assert hits[0].id == new.id  # written through the indexed path


def test_a_second_run_changes_nothing(m: Memory, llm: ScriptedLLM) -> None:
    chess_and_dogs(m)
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "chess" in msgs[-1].content, merge_answer("f1"))
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "Rex" in msgs[-1].content, SEPARATE)
    first = m.consolidate(SCOPE)
    assert first.changes == 1
    before = snapshot(m)

    again = m.consolidate(SCOPE)

    assert (again.merges, again.event_links, again.summaries) == ([], [], [])
    assert again.llm_calls == 1  # only the cluster the model kept separate is asked about again
    assert snapshot(m) == before


def test_the_dry_run_plans_the_same_changes_and_writes_nothing(m: Memory, llm: ScriptedLLM) -> None:
    chess_and_dogs(m)
    llm.add(
        lambda msgs: MERGE_PROMPT in msgs[-1].content and "chess" in msgs[-1].content,
        merge_answer("f1", "The user plays chess on Sundays, every week."),
    )
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "Rex" in msgs[-1].content, SEPARATE)
    before = snapshot(m)

    dry = m.consolidate(SCOPE, dry_run=True)

    assert dry.dry_run and len(dry.merges) == 1 and dry.llm_calls == 2
    assert snapshot(m) == before  # the store is unchanged
    real = m.consolidate(SCOPE)
    assert real.model_dump(exclude={"dry_run"}) == dry.model_dump(exclude={"dry_run"})
    assert snapshot(m) != before


def test_without_an_llm_only_the_same_or_near_identical_text_merges(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s") as m:
        # Different entity sets make add_fact store these as NEW; consolidation links facts that share an entity.
        first = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin"])
        again = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin"])
        assert again.decision == "DUPLICATE"  # reinforcement 2: the most reinforced text is kept
        dup = m.add_fact(
            SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin", "Germany"]
        ).fact
        # near-identical (0.775) to the others, but about Germany only: no entity shared with the kept fact
        m.add_fact(SCOPE, "The user lives in Berlin now.", kind="attribute", entities=["Germany"])
        m.add_fact(SCOPE, "The user has a dog named Rex.", kind="attribute")
        m.add_fact(SCOPE, "The user has a dog named Max.", kind="attribute")  # 0.714: below near-exact, kept

        r = m.consolidate(SCOPE)

        assert (r.llm_calls, r.kept_separate) == (0, [])
        [merge] = r.merges
        assert (merge.kept_id, merge.superseded, merge.decided_by) == (first.fact.id, [dup.id], "rule")
        assert merge.reinforcement == 3 and merge.reason == "the same text"
        assert sorted(f.text for f in m.facts(SCOPE)) == [
            "The user has a dog named Max.",
            "The user has a dog named Rex.",
            "The user lives in Berlin now.",
            "The user lives in Berlin.",
        ]
        assert m.consolidate(SCOPE).changes == 0


def test_events_are_linked_to_entities_they_name(m: Memory, llm: ScriptedLLM) -> None:
    event = {"subject": "user", "verb": "met", "object": "Ana", "text": "The user met Ana at the climbing gym.",
             "message_ids": ["m1"]}  # fmt: skip
    say(m, "s1", "2024-01-10", "I met Ana at the climbing gym.", events=[event])
    ana = {"name": "Ana", "type": "person", "aliases": []}
    say(m, "s2", "2024-02-10", "Ana is my climbing partner now.", entities=[ana])
    [ev] = m.events(SCOPE)
    [ent] = m.entities(SCOPE)

    dry = m.consolidate(SCOPE, dry_run=True)
    r = m.consolidate(SCOPE)

    assert [(x.event_id, x.entity_id, x.role) for x in r.event_links] == [(ev.id, ent.id, "object")]
    assert dry.event_links == r.event_links and r.llm_calls == 0
    assert m.consolidate(SCOPE).event_links == []  # linked once


def test_summaries_one_per_old_window_and_never_twice(m: Memory, llm: ScriptedLLM) -> None:
    say(m, "s1", "2024-01-08T09:00", "I booked flights to Lisbon for March.")
    say(m, "s2", "2024-01-11T19:00", "I started learning Portuguese.")
    say(m, "s3", "2024-02-10T10:00", "My sister Ana visited.")
    llm.add(lambda msgs: SUMMARY_PROMPT in msgs[-1].content and "2024-01-08 to 2024-01-14" in msgs[-1].content,
            {"summary": "The user booked flights to Lisbon for March and began learning Portuguese."})  # fmt: skip
    llm.add(lambda msgs: SUMMARY_PROMPT in msgs[-1].content and "2024-02-05 to 2024-02-11" in msgs[-1].content,
            {"summary": "The user's sister Ana visited."})  # fmt: skip

    dry = m.consolidate(SCOPE, summaries=True, dry_run=True)
    assert len(dry.summaries) == 2 and not any(f.id.startswith("fsum_") for f in m.facts(SCOPE))
    r = m.consolidate(SCOPE, summaries=True)

    assert r.llm_calls == 2  # one per window
    jan, feb = r.summaries
    assert (jan.fact_id, jan.session_ids, feb.session_ids) == ("fsum_20240108_7d", ["s1", "s2"], ["s3"])
    fact = {f.id: f for f in m.facts(SCOPE)}[jan.fact_id]
    assert fact.kind.value == "event" and fact.text.startswith("The user booked flights")
    assert (fact.valid_from, fact.recorded_at) == (
        jan.start.replace(hour=9),
        jan.start.replace(day=11, hour=19),
    )
    assert fact.message_ids == ["s1#0", "s2#0"]
    again = m.consolidate(SCOPE, summaries=True)
    assert (again.summaries, again.llm_calls) == ([], 0)  # idempotent: nothing new, nothing asked
    # a summary is never a versioning candidate: the same sentence said later is a fact of its own
    say(m, "s4", "2024-03-01", "Flights to Lisbon!", facts=[jan.text])
    assert [f.id for f in m.facts(SCOPE) if f.text == jan.text and f.id != jan.fact_id] != []
    assert {f.id: f for f in m.facts(SCOPE)}[jan.fact_id].reinforcement == 1


def test_summaries_need_an_llm_and_the_call_budget_defers_the_rest(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s") as m:
        m.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="s1", date="2024-01-08")
        with pytest.raises(NotAvailable, match="summaries need an LLM"):
            m.consolidate(SCOPE, summaries=True)
        m.consolidation = CONSOLIDATION.model_copy(update={"max_llm_calls": 0})
        r = m.consolidate(SCOPE, summaries=True, llm=ScriptedLLM())  # no step: any call would fail loudly
        assert (r.summaries, r.deferred, r.llm_calls) == ([], 1, 0)


def test_a_cluster_larger_than_max_cluster_is_merged_in_parts_over_runs(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s") as m:
        # similar to the first (the seed: longest) 0.905 and 0.704, over min_similarity 0.7
        for text in ("The user plays chess every Sunday morning.", "The user plays chess every Sunday.",
                     "The user plays chess on Sundays."):  # fmt: skip
            m.add_fact(SCOPE, text, kind="attribute")
        assert len(m.facts(SCOPE)) == 3
        m.consolidation = CONSOLIDATION.model_copy(update={"max_cluster": 2})
        llm = ScriptedLLM(ordered=False).add(MERGE_PROMPT, merge_answer("f1"))

        first = m.consolidate(SCOPE, llm=llm)
        second = m.consolidate(SCOPE, llm=llm)
        third = m.consolidate(SCOPE, llm=llm)

        assert (first.deferred, len(first.merges[0].superseded), first.llm_calls) == (1, 1, 1)
        assert (second.deferred, len(second.merges[0].superseded), second.merges[0].reinforcement) == (
            0,
            1,
            3,
        )
        assert (third.changes, third.llm_calls) == (0, 0)
        assert [f.text for f in m.facts(SCOPE)] == ["The user plays chess every Sunday morning."]


def test_a_failed_or_unusable_answer_leaves_the_cluster_alone(m: Memory, llm: ScriptedLLM) -> None:
    chess_and_dogs(m)
    before = snapshot(m)
    llm.add(
        lambda msgs: MERGE_PROMPT in msgs[-1].content and "chess" in msgs[-1].content, {"decision": "MAYBE"}
    )
    llm.add(lambda msgs: MERGE_PROMPT in msgs[-1].content and "Rex" in msgs[-1].content, RuntimeError("down"))

    r = m.consolidate(SCOPE)

    assert (r.merges, r.kept_separate) == ([], [])
    assert len(r.errors) == 2 and any("down" in e for e in r.errors)
    assert snapshot(m) == before
