"""``store.adjacency``: the graph stage of a search reads facts' visibility, the neighbourhoods of named entities and
the rounds behind facts and events from memory, with exactly the answers of the Kuzu queries it replaces, and a write
of extracted memory is seen by the very next search."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pytest

from graphrecall import Memory, RetrievalConfig, Scope, testing
from graphrecall.config import Settings
from graphrecall.dates import Cutoff
from graphrecall.embed import HashingEmbedder
from graphrecall.retrieve.graph import GraphCandidates
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store import facts as fq
from graphrecall.store.adjacency import adjacency
from graphrecall.store.database import ScopeDatabase, _chat_only
from graphrecall.store.facts import EventRow, ExtractionWrite, FactRow, Supersession
from graphrecall.store.rows import EntityRecord
from graphrecall.text import index_terms

SCOPE = Scope(org_id="acme", user_id="ada")
EMBEDDER = HashingEmbedder(64)
JAN, MAR, JUN = datetime(2024, 1, 10), datetime(2024, 3, 10), datetime(2024, 6, 10)
FEB, APR, MAY, JUL = datetime(2024, 2, 1), datetime(2024, 4, 1), datetime(2024, 5, 1), datetime(2024, 7, 1)
DEC = datetime(2024, 12, 1)


def _vec(text: str) -> np.ndarray:
    return np.asarray(EMBEDDER.embed([text]))[0]


def _fact(
    fid: str, text: str, *, recorded: datetime | None, valid_from: datetime | None, sid: str, ents: list[str]
) -> FactRow:
    return FactRow(
        id=fid, text=text, terms=index_terms(text), kind="attribute", polarity="positive", confidence=1.0,
        valid_from=valid_from, recorded_at=recorded, last_seen=recorded, session_id=sid, message_ids=[f"{sid}#0"],
        entity_ids=ents, vec=_vec(text),
    )  # fmt: skip


def _event(eid: str, text: str, sid: str, *, subject: list[str], obj: list[str] = []) -> EventRow:  # noqa: B006
    return EventRow(
        id=eid, subject="Ada", verb="did", object="", text=text, terms=index_terms(text), time_start=None,
        time_end=None, session_id=sid, message_ids=[f"{sid}#0"] if sid != "gone" else [], subject_ids=subject,
        object_ids=obj, vec=_vec(text),
    )  # fmt: skip


def _entity(eid: str, name: str) -> EntityRecord:
    return EntityRecord(id=eid, name=name, type="person", vec=_vec(name))


def _extract(db: ScopeDatabase, w: ExtractionWrite) -> None:
    with db.write() as txn:
        fq.write_extraction(txn, w, dim=EMBEDDER.dim)


@pytest.fixture
def mem(tmp_path: pytest.TempPathFactory) -> Iterator[Memory]:
    """Three sessions (January, March, June) that talk about Ada, with facts and events about her: a fact replaced
    in June, one replaced twice (in March, and by a fact with no recorded time), one undated, one valid only from
    December, one about Bo; an event of each session and one whose session is not stored."""
    with Memory.open(tmp_path, embedder=EMBEDDER, settings=Settings(root=tmp_path)) as m:  # type: ignore[arg-type]
        for sid, at in (("s1", JAN), ("s2", MAR), ("s3", JUN)):
            m.add_session(
                SCOPE,
                [
                    {"role": "user", "content": f"Ada Lovelace news from {sid}"},
                    {"role": "assistant", "content": "ok"},
                ],
                session_id=sid,
                date=at.isoformat(),
            )
        m.flush()
        with testing.database(m, SCOPE) as db:
            _extract(
                db,
                ExtractionWrite(
                    session_id="s1",
                    new_entities=[_entity("ada", "Ada Lovelace"), _entity("bo", "Bo Diddley")],
                    facts=[
                        _fact(
                            "f_old",
                            "Ada lives in London",
                            recorded=JAN,
                            valid_from=JAN,
                            sid="s1",
                            ents=["ada"],
                        ),
                        _fact(
                            "f_twice", "Ada likes tea", recorded=JAN, valid_from=JAN, sid="s1", ents=["ada"]
                        ),
                        _fact(
                            "f_undated",
                            "Ada plays chess",
                            recorded=None,
                            valid_from=None,
                            sid="s1",
                            ents=["ada"],
                        ),
                        _fact("f_bo", "Bo plays guitar", recorded=JAN, valid_from=JAN, sid="s1", ents=["bo"]),
                    ],
                    events=[_event("e1", "Ada moved house", "s1", subject=["ada"])],
                ),
            )
            _extract(
                db,
                ExtractionWrite(
                    session_id="s2",
                    facts=[
                        _fact(
                            "f_a", "Ada likes coffee", recorded=MAR, valid_from=MAR, sid="s2", ents=["ada"]
                        ),
                        _fact(
                            "f_b", "Ada likes cocoa", recorded=None, valid_from=None, sid="s2", ents=["ada"]
                        ),
                        _fact(
                            "f_later", "Ada will sail", recorded=MAR, valid_from=DEC, sid="s2", ents=["ada"]
                        ),
                    ],
                    events=[
                        _event("e2", "Ada met Bo", "s2", subject=["ada"], obj=["bo"]),
                        _event("e_orphan", "Ada wrote a letter", "gone", subject=["ada"]),
                    ],
                    supersessions=[
                        Supersession("f_twice", "f_a", valid_to=MAR, expired_at=MAR, reason="changed"),
                        Supersession("f_twice", "f_b", valid_to=MAR, expired_at=MAR, reason="changed"),
                    ],
                ),
            )
            _extract(
                db,
                ExtractionWrite(
                    session_id="s3",
                    facts=[
                        _fact(
                            "f_new",
                            "Ada lives in Paris",
                            recorded=JUN,
                            valid_from=JUN,
                            sid="s3",
                            ents=["ada"],
                        )
                    ],
                    events=[_event("e3", "Ada sold her car", "s3", subject=["bo"], obj=["ada"])],
                    supersessions=[
                        Supersession("f_old", "f_new", valid_to=JUN, expired_at=JUN, reason="moved")
                    ],
                ),
            )
        yield m


FACTS = ["f_old", "f_twice", "f_undated", "f_bo", "f_a", "f_b", "f_later", "f_new", "f_unknown"]
EVENTS = ["e1", "e2", "e3", "e_orphan", "e_unknown"]
BOUNDS = [None, FEB, APR, JUL]


@pytest.mark.parametrize("until", BOUNDS)
@pytest.mark.parametrize("as_of", BOUNDS)
def test_every_answer_is_the_kuzu_queries_answer(
    mem: Memory, until: datetime | None, as_of: datetime | None
) -> None:
    """The specification of the adjacency is the Cypher it replaces (``store.facts``, ``store.visibility``): at
    every cutoff and valid time, with NULL times, several supersessions of one fact, and an event whose session is
    not stored."""
    q = _vec("where does Ada live")
    with testing.database(mem, SCOPE) as db:
        adj = adjacency(db)
        assert adj.visible_fact_ids(FACTS, until, as_of) == fq.visible_fact_ids(db, FACTS, until, as_of)
        assert adj.visible_event_ids(EVENTS, until, as_of) == fq.visible_event_ids(db, EVENTS, until, as_of)
        ents = ["ada", "bo", "nobody"]
        ours = adj.entity_neighbourhood(ents, q, 4, db.indexes.vectors, until=until, as_of=as_of)
        theirs = fq.entity_neighbourhood(db, ents, q, 4, until=until, as_of=as_of)
        assert [(k, i) for k, i, _ in ours] == [(k, i) for k, i, _ in theirs]
        assert [s for _, _, s in ours] == pytest.approx([s for _, _, s in theirs], abs=1e-6)
        for table, ids in (("Fact", FACTS), ("Event", EVENTS)):
            assert adj.source_rounds(table, ids) == fq.source_rounds(db, table, ids)


@pytest.mark.parametrize("until", BOUNDS)
@pytest.mark.parametrize("as_of", BOUNDS)
def test_the_graph_lists_read_in_parts_are_the_lists_read_at_once(
    mem: Memory, until: datetime | None, as_of: datetime | None
) -> None:
    """The retriever reads the graph lists in three parts (before the query is embedded, its vector searches on a
    worker, the rest after): the same lists as one call, and the same hits whether the parts run on workers or
    one after another."""
    retrievers = {p: HybridRetriever(EMBEDDER, RetrievalConfig(parallel=p)) for p in (True, False)}
    graph, n = retrievers[True].graph, RetrievalConfig().candidates
    assert graph is not None
    cutoff = Cutoff(question_date=until, until=until) if until is not None else None
    q = "What about Ada Lovelace: where does she live, what does she like?"
    qv = EMBEDDER.embed([q], kind="query")[0]
    with testing.database(mem, SCOPE) as db:
        at_once = graph(db, q, qv, n, cutoff=cutoff, as_of=as_of)
        early = graph.early(db, q, n, cutoff, as_of)
        vectors = graph.vector_hits(db, qv, n)
        assert graph(db, q, qv, n, cutoff=cutoff, as_of=as_of, early=early, vectors=vectors) == at_once
        assert early.named_facts and at_once  # Ada is named, and her facts are candidates
        hits = {p: r.search(db, q, 10, cutoff=cutoff, as_of=as_of) for p, r in retrievers.items()}
    assert [(h.id, h.score, h.signals) for h in hits[True]] == [
        (h.id, h.score, h.signals) for h in hits[False]
    ]
    for h in hits[True]:  # each hit shows what the lists read at once gave its round
        for name, ranked in at_once.items():
            assert h.signals.get(name.value) == dict(ranked).get(h.id), (h.id, name)


def _found(db: ScopeDatabase, cutoff: datetime | None = None, as_of: datetime | None = None) -> set[str]:
    """The facts and events a search finds, directly or by entity expansion from "Ada Lovelace"."""
    graph = GraphCandidates(rrf_k=60)
    at = Cutoff(question_date=cutoff, until=cutoff) if cutoff is not None else None
    q = "What about Ada Lovelace: where does she live, what does she like?"
    qv = EMBEDDER.embed([q], kind="query")[0]
    hits = graph.node_hits(db, q, qv, 50, kinds=("fact", "event"), cutoff=at, as_of=as_of)
    expanded = adjacency(db).entity_neighbourhood(
        ["ada"], qv, 50, db.indexes.vectors, until=cutoff, as_of=as_of
    )
    return {h.id for h in hits} | {i for _, i, _ in expanded}


def test_a_fact_superseded_after_the_cutoff_is_still_visible_at_the_cutoff(mem: Memory) -> None:
    with testing.database(mem, SCOPE) as db:
        assert {"f_old", "f_a"} <= _found(db, APR)  # Paris came in June
        assert "f_new" not in _found(db, APR)
        assert "f_old" not in _found(db, JUL)
        assert "f_new" in _found(db, JUL)


def test_a_fact_replaced_by_an_undated_fact_is_replaced_at_every_cutoff(mem: Memory) -> None:
    with testing.database(mem, SCOPE) as db:
        for cutoff in (FEB, APR, JUL, None):
            assert "f_twice" not in _found(db, cutoff)
            assert "f_b" in _found(db, cutoff)


def test_as_of_sees_the_facts_valid_then_even_if_replaced_since(mem: Memory) -> None:
    with testing.database(mem, SCOPE) as db:
        found = _found(db, None, as_of=APR)
        assert {"f_old", "f_a", "f_undated"} <= found
        assert not {"f_new", "f_later", "f_twice"} & found  # not yet valid; replaced in March, before April


def test_an_event_whose_session_started_after_the_cutoff_is_hidden(mem: Memory) -> None:
    with testing.database(mem, SCOPE) as db:
        assert "e1" in _found(db, APR)
        assert "e3" not in _found(db, APR)  # its session is June's
        assert "e3" in _found(db, JUL)
        assert "e_orphan" not in _found(db, JUL)  # no session, no date: hidden at any cutoff


def test_a_write_is_seen_by_the_very_next_search(mem: Memory) -> None:
    """A new fact about a named entity, a supersession and an erase, each right after a search that built the
    adjacency: the next search sees it."""
    with testing.database(mem, SCOPE) as db:
        assert "f_rowing" not in _found(db, JUL)
        _extract(
            db,
            ExtractionWrite(
                session_id="s3",
                facts=[
                    _fact(
                        "f_rowing", "Ada took up rowing", recorded=JUN, valid_from=JUN, sid="s3", ents=["ada"]
                    )
                ],
            ),
        )
        assert "f_rowing" in _found(db, JUL)
        with db.write() as txn:
            fq.supersede(
                txn, Supersession("f_rowing", "f_new", valid_to=JUN, expired_at=JUN, reason="stopped")
            )
        assert "f_rowing" not in _found(db, JUL)
        assert "f_undated" in _found(db, JUL)
    mem.erase(SCOPE, fact_ids=["f_undated"])
    with testing.database(mem, SCOPE) as db:
        assert "f_undated" not in _found(db, JUL)


def test_new_chat_keeps_the_adjacency_and_extracted_memory_renews_it(mem: Memory) -> None:
    """Sessions, messages and rounds written after a search do not change what the graph stage reads when nothing
    extracted points at them, so the next search reuses the adjacency; a write of extracted memory renews it, and
    so does chat that gives a missing session to an event (which makes it visible) or that replaces a round a
    fact comes from (which changes its source rounds)."""
    with testing.database(mem, SCOPE) as db:
        first = adjacency(db)
        assert adjacency(db) is first
        assert first.orphans == {"gone"}
    mem.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="gone", date=MAY.isoformat())
    mem.flush()
    with testing.database(mem, SCOPE) as db:
        renewed = adjacency(db)
        assert renewed is not first and not renewed.orphans
        assert "e_orphan" in _found(db, JUL)  # its session now exists, dated May
        mem.add_session(
            SCOPE, [{"role": "user", "content": "more chat"}], session_id="s4", date=JUL.isoformat()
        )
        mem.flush()
        assert adjacency(db) is renewed
        _extract(
            db,
            ExtractionWrite(
                session_id="s4",
                facts=[_fact("f_s4", "Ada likes jazz", recorded=JUL, valid_from=JUL, sid="s4", ents=["ada"])],
            ),
        )
        assert adjacency(db) is not renewed
        assert (
            adjacency(db).source_rounds("Fact", ["f_s4"])
            == fq.source_rounds(db, "Fact", ["f_s4"])
            == {"f_s4": ["s4@0"]}
        )
        before = adjacency(db)
    mem.add_messages(SCOPE, [{"role": "assistant", "content": "noted"}], session_id="s4")  # s4's round grows
    mem.flush()
    with testing.database(mem, SCOPE) as db:
        assert adjacency(db) is not before
        assert adjacency(db).source_rounds("Fact", ["f_s4"]) == fq.source_rounds(db, "Fact", ["f_s4"])


@pytest.mark.parametrize(
    ("statement", "chat"),
    [
        ("MATCH (s:Session {key: $k}) SET s.updated_at = $now", True),  # ingest and the write log
        ("MATCH (s:Scope {key: $scope}) SET s.mark_fact = $mark_fact", True),  # every write's marks
        ("MATCH (s:Session {key: $k}) SET s.extract_status = $st, s.extract_error = $err", True),
        ("MATCH (n:Round {key: $k}) SET n.feedback = coalesce(n.feedback, 0) + $d RETURN n.feedback", True),
        (
            "MATCH (r:Round {key: $k}) OPTIONAL MATCH (p:Passage)-[:PASSAGE_OF]->(r) "
            "WITH r, p, p.id AS pid DETACH DELETE p, r RETURN pid",
            True,
        ),  # a replaced round: its id is noted by ``unindex``
        ("MATCH (s:Session {key: $k}) SET s.started_at = $t", False),
        ("MATCH (r:Round {key: $k}) SET r.message_ids = $m", False),
        ("MATCH (f:Fact {key: $k}) SET f.disputed_at = $t, f.dispute_note = $n", False),  # feedback on a fact
        ("MATCH (e:Entity {key: $k}) SET e.aliases = $a", False),
        (
            "MATCH (o:Fact {key: $old}), (n:Fact {key: $new}) SET o.valid_to = $vt CREATE (n)-[:SUPERSEDES]->(o)",
            False,
        ),
        ("MATCH (n:Message {key: $k}) DETACH DELETE n", False),  # erase
        ("MATCH (n:Session {key: $k}) DETACH DELETE n", False),
    ],
)
def test_which_statements_are_chat_alone(statement: str, chat: bool) -> None:
    """What ``WriteTxn`` counts as a write of chat (no rebuild of the adjacency, only a note): stamps on sessions,
    rounds and the scope row, and rounds replaced; never a session's start, a round's messages, anything of facts,
    events or entities, or a deletion of messages or sessions."""
    assert _chat_only(statement) is chat


def test_a_later_view_of_the_scope_reuses_the_adjacency_until_a_write_changes_it(mem: Memory) -> None:
    """The pool closes the view of a user not searched lately; the adjacency is kept with the scope's generations
    (its bucket's), so the next view's search does not build it again, unless extracted memory changed."""
    from graphrecall.store import adjacency as adjacency_module

    with testing.database(mem, SCOPE) as db:
        first = adjacency(db)
        adjacency_module._CACHE.clear()  # as if its view had been closed
        assert adjacency(db) is first
        adjacency_module._CACHE.clear()
        _extract(
            db,
            ExtractionWrite(
                session_id="s3",
                facts=[_fact("f_kept", "Ada sings", recorded=JUN, valid_from=JUN, sid="s3", ents=["ada"])],
            ),
        )
        renewed = adjacency(db)
        assert renewed is not first and "f_kept" in renewed.facts


@pytest.mark.parametrize("oversample", [1, 3])
def test_graph_oversample_sets_how_many_candidates_each_fact_and_event_index_gives(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, oversample: int
) -> None:
    """``RetrievalConfig.graph_oversample``: each fact and event index (vector and BM25) is asked for that many
    times ``candidates``, the round indexes for ``candidates`` as before."""
    from graphrecall.retrieve import graph as graph_module

    asked: dict[str, int] = {}
    vector_search, lexical_search = graph_module.q.vector_search, graph_module.q.lexical_search

    def vectors(db: ScopeDatabase, index: str, vec: object, k: int) -> list[tuple[str, float]]:
        asked[index] = k
        return vector_search(db, index, vec, k)  # type: ignore[arg-type]

    def lexical(db: ScopeDatabase, index: str, terms: object, k: int) -> list[tuple[str, float]]:
        asked[index] = k
        return lexical_search(db, index, terms, k)  # type: ignore[arg-type]

    monkeypatch.setattr(graph_module.q, "vector_search", vectors)
    monkeypatch.setattr(graph_module.q, "lexical_search", lexical)
    retriever = HybridRetriever(EMBEDDER, RetrievalConfig(candidates=20, graph_oversample=oversample))
    with testing.database(mem, SCOPE) as db:
        hits = retriever.search(db, "Where does Ada Lovelace live?", 5)
    assert hits and {
        i: asked[i] for i in ("fact_vec", "event_vec", "fact_terms", "event_terms")
    } == dict.fromkeys(("fact_vec", "event_vec", "fact_terms", "event_terms"), 20 * oversample)
    assert asked["round_user"] == asked["round_terms"] == 20
