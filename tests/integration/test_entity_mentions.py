"""``store.mentions.entities_named_in``: the entities a question names, found without reading every entity.

The specification is the rule entity expansion always used, applied here to every stored entity in Python: an
entity is named when one of its match keys (``names.match_keys``, at least three characters) occurs in the
normalized question as whole words. The store query must give exactly that set for any question, including names
that normalization changes (non-ASCII letters, ligatures, full-width forms, possessives, punctuation, role words),
while reading the entity table only when it changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall import Memory, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.models import Entity, Fact, Scope, ScopeExport
from graphrecall.names import match_keys, normalize_name
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.mentions import entities_named_in

SCOPE = Scope(org_id="acme", user_id="mentions")

# (name, aliases): plain names, role words, honorifics, possessives, punctuation, digits, short keys, and names whose
# normalized form is not their lowercased text (NFKC, casefolding, ligatures, full-width letters, dotted capitals).
NAMES: list[tuple[str, list[str]]] = [
    ("Ana", []),
    ("my sister Ana", ["Ana B."]),
    ("Dr. Bob O'Neil", ["Bobby"]),
    ("Straße Café", []),
    ("José", ["Pepe"]),
    ("ＡＢＣ Corp", []),  # full-width letters: NFKC makes them "abc"
    ("İstanbul", []),
    ("ﬁnn", []),  # the "fi" ligature
    ("Plan B", []),
    ("R2-D2", ["r2d2"]),
    ("Jean-Luc Picard", ["Captain Picard"]),
    ("St. James's Park", []),
    ("Mom", []),
    ("dog Rex", []),
    ("Carlos'", []),
    ("Ana_Maria", []),
    ("C++", []),
    ("E.T.", []),
    ("Bob's Burgers", []),
    ("the Office", []),
    ("New York City", ["NYC", "the Big Apple"]),
    ("Zoë", []),
    ("Ωmega", []),
    ("Al", ["Alfred"]),
    ("Kim", ["kim"]),
    ("Lisbon", ["Lisboa", "Lisbön"]),
    ("best friend Tom", []),
    ("UPPER CASE INC", []),
    ("Mark", ["Marc", "Marco Polo"]),
    ("Cafe", []),
]
FILLER = [
    "what",
    "did",
    "I",
    "tell",
    "you",
    "about",
    "my",
    "the",
    "and",
    "a",
    "of",
    "in",
    "visit",
    "with",
    "sister",
]


def reference(entities: Sequence[tuple[str, str, list[str]]], question: str) -> list[str]:
    """The rule, over every entity (what retrieval computed before the store query existed)."""
    padded = f" {normalize_name(question)} "
    return sorted(
        eid
        for eid, name, aliases in entities
        if any(len(k) >= 3 and f" {k} " in padded for k in match_keys(name, aliases))
    )


@pytest.fixture(scope="module")
def stored(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Memory, list[tuple[str, str, list[str]]]]]:
    root: Path = tmp_path_factory.mktemp("mentions")
    entities = [Entity(id=f"ent_{i}", name=n, type="thing", aliases=a) for i, (n, a) in enumerate(NAMES)]
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as mem:
        mem.import_scope(SCOPE, ScopeExport(entities=entities))
        yield mem, [(e.id, e.name, list(e.aliases)) for e in entities]


def words_of(text: str) -> list[str]:
    return [w for w in re.split(r"\s+", text) if w]


VOCAB = sorted({w for name, aliases in NAMES for raw in (name, *aliases) for w in words_of(raw)})
SEPARATORS = [" ", ", ", "'s ", "? ", " - ", "  "]


@st.composite
def questions(draw: st.DrawFn) -> str:
    """Words of the stored names (whole, cased differently, cut, glued) among filler words and punctuation."""
    words = draw(st.lists(st.sampled_from(VOCAB + FILLER), min_size=1, max_size=8))
    out = []
    for w in words:
        form = draw(st.sampled_from(["same", "upper", "lower", "title", "cut", "glued"]))
        if form == "upper":
            w = w.upper()
        elif form == "lower":
            w = w.lower()
        elif form == "title":
            w = w.title()
        elif form == "cut" and len(w) > 2:
            w = w[:-1]
        elif form == "glued":
            w = w + "x"
        out.append(w + draw(st.sampled_from(SEPARATORS)))
    return "".join(out).strip()


@given(question=questions())
def test_the_store_finds_exactly_the_entities_the_rule_names(
    stored: tuple[Memory, list[tuple[str, str, list[str]]]], question: str
) -> None:
    mem, entities = stored
    with testing.database(mem, SCOPE) as db:
        assert entities_named_in(db, question) == reference(entities, question), question


@pytest.mark.parametrize(
    ("question", "named"),
    [
        (
            "How is my sister doing?",
            [],
        ),  # "sister" alone names no one: role words are dropped only before a name
        ("What did Ana say?", ["Ana", "my sister Ana"]),
        ("Any news from STRASSE CAFÉ?", ["Straße Café"]),  # casefolding: ß is ss
        ("Any news from strasse cafe?", ["Cafe"]),  # ... but é stays é
        ("Did the abc corp reply?", ["ＡＢＣ Corp"]),  # NFKC: full-width letters are letters
        ("When did Finn call?", ["ﬁnn"]),
        ("Is Al coming?", []),  # a key shorter than three characters never matches
        ("What about Alfred?", ["Al"]),  # ... but the same entity's longer alias does
        ("Tell me about Bob's plans", []),  # "bob" is not a key of "Dr. Bob O'Neil" (only the whole name is)
        ("Did Bob O'Neil write back?", ["Dr. Bob O'Neil"]),
        ("the big apple trip", ["New York City"]),
        ("Tell me more about lisbön", ["Lisbon"]),  # a non-ASCII alias
    ],
)
def test_names_that_normalization_changes(
    stored: tuple[Memory, list[tuple[str, str, list[str]]]], question: str, named: list[str]
) -> None:
    mem, entities = stored
    ids = {name: eid for eid, name, _ in entities}
    with testing.database(mem, SCOPE) as db:
        assert entities_named_in(db, question) == sorted(ids[n] for n in named)


class RowCounter:
    """Rows that ``ScopeDatabase.query`` returned, per call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[int] = []
        real = ScopeDatabase.query

        def counting(db: ScopeDatabase, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
            out = real(db, cypher, params)
            self.rows.append(len(out))
            return out

        monkeypatch.setattr(ScopeDatabase, "query", counting)

    def take(self) -> list[int]:
        out, self.rows = self.rows, []
        return out


def test_the_entities_are_read_once_until_one_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point of the index: a lookup runs no Kuzu statement, unless an entity was added, given an alias or erased
    since the last read, whoever wrote it (every such write bumps the scope's graph generation); then the next
    lookup reads the table again and sees the change. New chat does not make it read again."""
    scope = Scope(org_id="acme", user_id="changes")
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path)) as mem:
        entities = [Entity(id=f"ent_{i}", name=n, type="thing", aliases=a) for i, (n, a) in enumerate(NAMES)]
        mem.import_scope(scope, ScopeExport(entities=entities))
        counter = RowCounter(monkeypatch)
        with testing.database(mem, scope) as db:
            assert entities_named_in(db, "Where is Jean-Luc Picard?") == ["ent_10"]
            assert max(counter.take()) == len(NAMES)  # the first lookup reads the table
            assert entities_named_in(db, "And Captain Picard?") == ["ent_10"]
            assert entities_named_in(db, "Did Jean-Luc call?") == []
            assert counter.take() == []  # then nothing from Kuzu
            with db.write() as txn:  # new chat, as ingest writes it: no entity can have changed
                txn.execute("MATCH (s:Scope {key: $scope}) SET s.mark_round = s.mark_round")
            assert entities_named_in(db, "Did Jean-Luc call?") == []
            assert counter.take() == []
            with db.write() as txn:  # an alias added behind the index's back, as extraction adds one
                txn.execute(
                    "MATCH (e:Entity {key: $k}) SET e.aliases = ['Captain Picard', 'Jean-Luc']",
                    {"k": txn.key("ent_10")},
                )
            assert entities_named_in(db, "Did Jean-Luc call?") == ["ent_10"]
        added = mem.add_fact(scope, "Zed prefers tea", entities=["Zed Whitmore"])  # a new entity
        [zed] = [e.id for e in mem.entities(scope) if e.name == "Zed Whitmore"]
        with testing.database(mem, scope) as db:
            assert entities_named_in(db, "Is Zed Whitmore in?") == [zed]
        mem.erase(scope, fact_ids=[added.fact.id])  # ... erased with its only fact
        with testing.database(mem, scope) as db:
            assert entities_named_in(db, "Is Zed Whitmore in?") == []


def test_a_search_naming_an_entity_ranks_the_rounds_of_its_facts(tmp_path: Path) -> None:
    """End to end: the rounds that a named entity's facts came from carry the ``entity`` signal; the rounds of
    another entity's facts do not."""
    scope = Scope(org_id="acme", user_id="expansion")
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path)) as mem:
        sessions = [
            {
                "session_id": f"s{i}",
                "date": f"2024-05-0{i + 1}",
                "messages": [{"role": "user", "content": text}],
            }
            for i, text in enumerate(["Ana only drinks green tea.", "Bob switched to decaf coffee."])
        ]
        mem.add_sessions(scope, sessions)
        stored = mem.export_scope(scope).sessions
        source = {s.id: s.messages[0].id or "" for s in stored}
        entities = [
            Entity(id="ent_ana", name="Ana", type="person"),
            Entity(id="ent_bob", name="Bob", type="person"),
        ]
        facts = [
            Fact(id="f_ana", text="Ana drinks green tea", session_id="s0", message_ids=[source["s0"]],
                 entity_ids=["ent_ana"]),
            Fact(id="f_bob", text="Bob drinks decaf coffee", session_id="s1", message_ids=[source["s1"]],
                 entity_ids=["ent_bob"]),
        ]  # fmt: skip
        mem.import_scope(scope, ScopeExport(sessions=stored, entities=entities, facts=facts))
        hits = mem.search(scope, "What does Ana drink these days?", k=5, question_date="2024-06-01")
    by_session = {h.session_id: h.signals for h in hits}
    assert "entity" in by_session["s0"]
    assert "entity" not in by_session.get("s1", {})
