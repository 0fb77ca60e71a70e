"""A whole scope exported as JSON and imported into a fresh store comes back with nothing lost: sessions and
messages, every fact (superseded ones with their stamps) and the SUPERSEDES edges, events with their entities,
entities, relations, extraction states; and it draws as GraphML that networkx loads. Built by real (scripted)
extraction into real Kuzu."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory, testing
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.formats import scope_to_graphml
from graphrecall.llm import ScriptedLLM
from graphrecall.llm.errors import LLMError
from graphrecall.models import ScopeExport
from graphrecall.store.schema import MATCH_SCOPE, owned

SCOPE = ("acme", "bob")
COPY = ("acme", "bob-copy")
VERSION = "New facts, each followed"


def fact(text: str, *about: str, kind: str = "attribute") -> dict[str, Any]:
    return {"text": text, "kind": kind, "message_ids": ["m1"], "about": list(about)}


def build(root: Path) -> None:
    """Months of memory: a move (UPDATE), a restatement (DUPLICATE, two sessions' messages), events with
    subjects and objects, a relation, a failed extraction, an unextracted session, an application fact and a
    supersession by hand."""
    llm = ScriptedLLM(ordered=False)
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False)
    with Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as m:
        llm.add("Session id: s1\n", {
            "facts": [fact("The user lives in Munich."), fact("Ana is the user's sister.", "Ana", kind="relationship"),
                      fact("The user is vegetarian.", kind="preference")],
            "events": [{"subject": "Ana", "verb": "visit", "object": "Munich", "text": "Ana visited the user.",
                        "time_start": "2024-01-05", "message_ids": ["m1"]}],
            "entities": [{"name": "Ana", "type": "person", "aliases": ["my sister"]},
                         {"name": "Munich", "type": "place"}],
            "relations": [{"source": "Ana", "relation": "sister of", "target": "Munich", "message_ids": ["m1"]}],
        }, times=1)  # fmt: skip
        llm.add("Session id: s2\n", {
            "facts": [fact("The user lives in Berlin."), fact("The user is vegetarian.", kind="preference")],
        }, times=1)  # fmt: skip
        llm.add(VERSION, {"decisions": [
            {"fact": "n1", "decision": "UPDATE", "target": "c1", "reason": "moved to Berlin"}]}, times=1)  # fmt: skip
        llm.add("Session id: s3\n", LLMError("the model was down"), times=1)
        for sid, date in (
            ("s1", "2024-01-10T09:00"),
            ("s2", "2024-03-05T18:30"),
            ("s3", "2024-04-01"),
            ("s4", "2024-05-01"),
        ):
            said = [{"role": "user", "content": f"what I said in {sid}"},
                    {"role": "assistant", "content": f"reply in {sid}", "at": f"{date[:10]}T23:00:00"}]  # fmt: skip
            m.add_session(SCOPE, said, session_id=sid, date=date, extract=sid != "s4")
        m.llm = None  # application facts by the rule
        m.add_fact(SCOPE, "The user's plan is Pro.", entities=["Globex"], source="crm")
        newer = m.add_fact(SCOPE, "The user's plan is Enterprise.", entities=["Globex"], source="crm").fact
        old = next(f for f in m.facts(SCOPE) if f.text == "The user's plan is Pro.")
        m.supersede(SCOPE, old.id, newer.id, reason="upgraded")


def edges(m: Memory, scope: tuple[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every relationship of the store, with its properties, and every node count."""
    queries = {
        "FACT_FROM": f"{MATCH_SCOPE}MATCH {owned('a', 'Fact')}-[:FACT_FROM]->(b:Message) RETURN a.id, b.id",
        "ABOUT": f"{MATCH_SCOPE}MATCH {owned('a', 'Fact')}-[:ABOUT]->(b:Entity) RETURN a.id, b.id",
        "SUPERSEDES": f"{MATCH_SCOPE}MATCH {owned('a', 'Fact')}-[r:SUPERSEDES]->(b:Fact) RETURN a.id, b.id, r.at, r.reason",
        "EVENT_FROM": f"{MATCH_SCOPE}MATCH {owned('a', 'Event')}-[:EVENT_FROM]->(b:Message) RETURN a.id, b.id",
        "SUBJECT": f"{MATCH_SCOPE}MATCH {owned('a', 'Event')}-[:SUBJECT]->(b:Entity) RETURN a.id, b.id",
        "OBJECT": f"{MATCH_SCOPE}MATCH {owned('a', 'Event')}-[:OBJECT]->(b:Entity) RETURN a.id, b.id",
        "RELATED": f"{MATCH_SCOPE}MATCH {owned('a', 'Entity')}-[r:RELATED]->(b:Entity) RETURN a.id, b.id, r.predicate, r.fact_id",
        "MSG_IN": f"{MATCH_SCOPE}MATCH {owned('a', 'Message')}-[:MSG_IN]->(b:Session) RETURN a.id, b.id",
        "sessions": f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id, s.started_at, s.extract_status, s.extract_error",
        "messages": f"{MATCH_SCOPE}MATCH {owned('x', 'Message')} RETURN x.id, x.session_id, x.idx, x.role, x.text, x.at",
        "rounds": f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id, r.at, r.message_ids",  # texts: messages
        "entities": f"{MATCH_SCOPE}MATCH {owned('e', 'Entity')} RETURN e.id, e.name, e.norm, e.type, e.aliases, e.embedding",
        "facts": f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} RETURN f.id, f.text, f.terms, f.kind, f.polarity, f.confidence, "
        "f.valid_from, f.valid_to, f.recorded_at, f.expired_at, f.last_seen, f.session_id, f.message_ids, f.embedding",
        "events": f"{MATCH_SCOPE}MATCH {owned('e', 'Event')} RETURN e.id, e.subject, e.verb, e.object, e.text, e.terms, "
        "e.time_start, e.time_end, e.session_id, e.message_ids, e.embedding",
    }
    with testing.database(m, scope) as db:
        return {name: sorted(tuple(map(repr, r)) for r in db.query(q)) for name, q in queries.items()}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    build(tmp_path / "a")
    yield tmp_path


def test_json_round_trips_with_nothing_lost(store: Path) -> None:
    with Memory.open(store / "a", embedder=HashingEmbedder(64)) as m:
        before = m.export_scope(SCOPE)
        graph_before = edges(m, SCOPE)
    assert len(before.sessions) == 4 and {s.extract_status for s in before.sessions} == {
        "done",
        "failed",
        "none",
    }
    assert len(before.supersedes) == 2 and len(before.facts) == 6 and before.relations and before.events
    assert next(s for s in before.sessions if s.id == "s3").extract_error == "LLMError: the model was down"
    text = before.model_dump_json()
    with Memory.open(store / "b", embedder=HashingEmbedder(64)) as fresh:
        r = fresh.import_scope(COPY, json.loads(text))
        assert (r.sessions_added, r.facts, r.supersedes, r.events, r.graph_skipped) == (4, 6, 2, 1, False)
        after = fresh.export_scope(COPY)
        graph_after = edges(fresh, COPY)
        # the restored scope behaves the same: current facts, versions, the profile, fact search
        with Memory.open(store / "a", embedder=HashingEmbedder(64)) as m:
            assert fresh.facts(COPY) == m.facts(SCOPE)
            assert fresh.profile(COPY, "2024-06-01") == m.profile(SCOPE, "2024-06-01").model_copy(
                update={"scope": fresh.profile(COPY).scope}
            )
            q = "where does the user live"
            copied = [h.model_copy(update={"scope": None}) for h in fresh.search(COPY, q, kinds=("fact",))]
            assert copied == [
                h.model_copy(update={"scope": None}) for h in m.search(SCOPE, q, kinds=("fact",))
            ]
        again = fresh.import_scope(COPY, before)  # a repeated import changes nothing
        assert (again.sessions_added, again.messages_added, again.graph_skipped) == (0, 0, True)
        assert edges(fresh, COPY) == graph_after
    same = {"exported_at", "org_id", "user_id"}
    assert after.model_dump(exclude=same) == before.model_dump(exclude=same)
    assert graph_after == graph_before


def test_a_scope_of_application_facts_alone_round_trips(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "a", embedder=HashingEmbedder(64)) as m:
        m.add_fact(SCOPE, "The user's plan is Pro.", kind="attribute", entities=["Globex"])
        doc = m.export_scope(SCOPE)
    with Memory.open(tmp_path / "b", embedder=HashingEmbedder(64)) as fresh:
        r = fresh.import_scope(COPY, doc)
        assert (r.sessions_added, r.facts, r.entities) == (0, 1, 1)
        assert fresh.facts(COPY) == doc.facts and fresh.entities(COPY) == doc.entities


def test_extraction_states_round_trip_without_extracted_memory(tmp_path: Path) -> None:
    """Sessions extracted with nothing found, or whose extraction failed, keep their state: a restored scope (and a
    re-embedded one) is not sent to the LLM again. Import dropped them when the export held no facts."""
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", {"facts": [], "events": [], "entities": []}, times=1)
    llm.add("Session id: s2\n", LLMError("the model was down"), times=1)
    cfg = ExtractionConfig(background=False)
    with Memory.open(tmp_path / "a", embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as m:
        for sid in ("s1", "s2", "s3"):
            m.add_session(SCOPE, [{"role": "user", "content": f"hello from {sid}"}], session_id=sid,
                          extract=sid != "s3")  # fmt: skip
        doc = m.export_scope(SCOPE)
    states = {s.id: (s.extract_status, s.extract_error) for s in doc.sessions}
    assert states == {
        "s1": ("done", None),
        "s2": ("failed", "LLMError: the model was down"),
        "s3": ("none", None),
    }
    assert not (doc.facts or doc.events or doc.entities)
    with Memory.open(tmp_path / "b", embedder=HashingEmbedder(64)) as fresh:
        fresh.import_scope(COPY, doc)
        assert {
            s.id: (s.extract_status, s.extract_error) for s in fresh.export_scope(COPY).sessions
        } == states


def test_an_import_that_would_merge_two_memories_is_refused_before_writing(store: Path) -> None:
    with Memory.open(store / "a", embedder=HashingEmbedder(64)) as m:
        doc = m.export_scope(SCOPE)
        m.add_fact(("acme", "carl"), "The user likes chess.")
        with pytest.raises(InvalidInput, match="other extracted memory"):
            m.import_scope(("acme", "carl"), doc)
        assert [s.id for s in m.sessions(("acme", "carl"))] == []  # nothing added
        current = next(f for f in doc.facts if f.current and not f.entity_ids)
        stranger = current.model_copy(update={"id": "f_not_stored_here"})
        part = ScopeExport(sessions=doc.sessions, facts=[current, stranger])
        with pytest.raises(InvalidInput, match="part of this export"):
            m.import_scope(SCOPE, part)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["facts"][0].update(message_ids=["nowhere#0"]), "facts[0].message_ids"),
        (lambda d: d["facts"][0].update(entity_ids=["e_missing"]), "facts[0].entity_ids"),
        (lambda d: d["supersedes"].pop(), "facts["),
        (lambda d: d["events"][0].update(subject_ids=["e_missing"]), "events[0]"),
        (lambda d: d["facts"].append(d["facts"][0]), "facts"),
        (lambda d: d["facts"][0].update(kind="mood"), "facts[0].kind"),
    ],
)
def test_a_broken_export_is_refused_naming_the_item(store: Path, change: Any, where: str) -> None:
    with Memory.open(store / "a", embedder=HashingEmbedder(64)) as m:
        doc = json.loads(m.export_scope(SCOPE).model_dump_json())
        change(doc)
        with pytest.raises(InvalidInput) as e:
            m.import_scope(COPY, doc)
        assert e.value.where.startswith(where)
        assert m.sessions(COPY) == []


def graphml_of(store: Path) -> tuple[ScopeExport, str]:
    with Memory.open(store / "a", embedder=HashingEmbedder(64)) as m:
        doc = m.export_scope(SCOPE)
    return doc, scope_to_graphml(doc)


def test_graphml_holds_every_node_and_edge_with_attributes(store: Path) -> None:
    doc, text = graphml_of(store)
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    root = ET.fromstring(text)
    keys = {k.get("id"): k.get("attr.name") for k in root.findall("g:key", ns)}
    nodes = root.findall("g:graph/g:node", ns)
    assert len(nodes) == len(doc.sessions) + len(doc.entities) + len(doc.facts) + len(doc.events)
    kinds: dict[str, int] = {}
    for e in root.findall("g:graph/g:edge", ns):
        [kind] = [d.text for d in e.findall("g:data", ns) if keys[d.get("key")] == "type"]
        kinds[kind or ""] = kinds.get(kind or "", 0) + 1
    assert kinds["SUPERSEDES"] == 2 and kinds["RELATED"] == 1 and kinds["SUBJECT"] == 1
    assert kinds["ABOUT"] == sum(len(f.entity_ids) for f in doc.facts)
    assert kinds["FROM"] == sum(1 for f in doc.facts if f.session_id in {"s1", "s2", "s3", "s4"}) + len(
        doc.events
    )


def test_graphml_loads_in_networkx(store: Path) -> None:
    nx = pytest.importorskip("networkx")
    doc, text = graphml_of(store)
    path = store / "g.graphml"
    path.write_text(text)
    g = nx.read_graphml(path)
    old = next(f for f in doc.facts if f.text == "The user lives in Munich.")
    node = g.nodes[f"fact:{old.id}"]
    assert node["type"] == "Fact" and node["current"] is False and node["confidence"] == old.confidence
    assert node["valid_to"] == old.valid_to.isoformat()  # type: ignore[union-attr]
    sup = [d for _, _, d in g.in_edges(f"fact:{old.id}", data=True) if d["type"] == "SUPERSEDES"]
    assert sup and sup[0]["reason"].startswith("update: moved to Berlin")
    assert g.nodes["session:s1"]["messages"] == 2


def test_cli_exports_json_and_graphml_and_imports(store: Path, capsys: Any) -> None:
    common = ["--root", str(store / "a"), "--embedder", "hashing"]
    bob = ["--org", "acme", "--user", "bob", *common]
    assert main(["export", *bob, "--format", "json", "-o", str(store / "bob.json.gz")]) == 0
    assert "6 facts (2 superseded)" in capsys.readouterr().err
    assert (
        main(["import", str(store / "bob.json.gz"), "--org", "acme", "--user", "copy", *common, "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert (result["sessions_added"], result["facts"], result["supersedes"]) == (4, 6, 2)
    assert main(["export", "--org", "acme", "--user", "copy", *common, "--format", "graphml"]) == 0
    assert capsys.readouterr().out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<graphml')
    # the sessions-only export still reads back with ingest, and ingest points a whole export to import
    assert main(["export", *bob, "-o", str(store / "sessions.json")]) == 0
    assert (
        main(["ingest", str(store / "sessions.json"), "--org", "acme", "--user", "raw", *common, "--quiet"])
        == 0
    )
    assert main(["export", *bob, "--format", "json", "-o", str(store / "bob.json")]) == 0
    capsys.readouterr()
    assert main(["ingest", str(store / "bob.json"), "--org", "acme", "--user", "raw", *common]) == 2
    assert "graphrecall import" in capsys.readouterr().err
    assert main(["import", str(store / "sessions.json"), "--org", "acme", "--user", "x", *common]) == 2
    assert "graphrecall ingest" in capsys.readouterr().err
