"""Search latency on an extracted scope with many entities: what entity expansion costs as the graph grows.

    python -m benchmarks.perf.entities --entities 10000 --out benchmarks/results/perf-entities

Builds one scope through the public API: ``--sessions`` sessions of chat (``add_sessions``), then ``--entities``
entities (people, some with a first-name alias shared by others, and organisations), two facts per entity and an
event for every fifth, each fact and event sourced from a message that names its entity (``import_scope``). Then
searches ``--questions`` questions, most naming an entity (by full name, by alias, or an organisation) and some
naming none, each ``--repeats`` times after a warm-up, and reports the search's wall time and its ``graph`` stage
(``HybridRetriever.search(timings=)``: facts, events and entity expansion), p50 and p95. Then the same searches as
an application makes them (``Memory.search``, the query embedded by the model, not the cache), on both scopes.

Beside it, the entity lookup alone on the same store, where this checkout has ``store.mentions``: its index of
match keys (checked against the entity table on every lookup) against the rule it replaced (every entity read and
matched in Python, as ``retrieve.graph`` did up to 4560ba3), with a check that both find the same entities for
every question.

Beside that too, where this checkout has ``store.adjacency``: the time to build the scope's adjacency from Kuzu
(what the first search after a write of extracted memory pays; the timed searches reuse the one the warm-up built).

Every search's hits are written as a ranking dump (``benchmarks.rankings``), so two runs of this script on two
checkouts compare with ``python -m benchmarks.rankings.compare``. The script uses only what both sides of the change
have (the facade, ``testing.retriever``, ``timings``), so it measures "before" when run on the older checkout.
"""

from __future__ import annotations

import argparse
import importlib
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import arguments
from benchmarks.jsonfile import save_report
from benchmarks.perf.latency import summarize
from benchmarks.provenance import Run
from benchmarks.rankings import dump as rankings
from graphrecall import Memory, testing
from graphrecall.config import Settings
from graphrecall.embed import CachedEmbedder, Embedder, embedder_from_spec
from graphrecall.models import Entity, ExportedEvent, Fact, Scope, ScopeExport
from graphrecall.names import match_keys, normalize_name
from graphrecall.store.database import ScopeDatabase

SCOPE = Scope(org_id="perf", user_id="entities")
PLAIN = Scope(org_id="perf", user_id="plain")
"""The same sessions with nothing extracted: what a search costs without the graph (issue 28: within 1.2x)."""
K = 50
START = datetime(2024, 1, 1, 9, 0)
QUESTION_DATE = "2025-06-01"

FIRST = (
    "Ana Ben Carla Dev Elena Farid Greta Hugo Iris Jonas Kira Liam Mona Nils Olga Pablo Quinn Rosa Sami Tara Ugo "
    "Vera Wim Xena Yusuf Zoe Aiko Bram Chen Dina Emil Fiona Gil Hana Ivan Jade Kofi Lena Malik Nora Omar Pia Raj "
    "Sara Theo Uma Vik Wendy Yara Zane Abel Bea Cyril Dora Ezra Flora Gus Hedda Ines Jules"
).split()
LAST = (
    "Novak Silva Okafor Tanaka Larsen Moreau Rossi Kowalski Haddad Nguyen Fischer Garcia Ivanova Kim Lopez "
    "Murphy Nakamura Olsen Petrov Quist Reyes Schmidt Torres Ueda Vargas Weber Xu Yilmaz Zhang Abbott Bauer "
    "Castro Dubois Eriksen Ferreira Gallo Hansen Iqbal Jansen Kaur Lindqvist Mendes Nowak Ortiz Park Quinto "
    "Ramos Sato Thorne Urban Vidal Walsh Young Zimmer Adler Becker Costa Diaz Engel Foster Greco Holm Ibsen "
    "Jovanovic Keller Lund Marino Nash Otto Pike Ruiz Stone Tucker Udall Voss Wolff Yates Ziegler Alves Brandt "
    "Cruz Dahl Evans Frost Gray Horn Ito Jung Klein Lang Meyer Noble Oakes Price Reed Shaw Todd Underwood Vance "
    "Ward York Baird Cole Drake Ellis Fox Grant Hayes Irwin Joyce Knox Lowe Marsh North Owen Pratt Rhodes Scott "
    "Tate Upton Vale Webb Abbas Boyle Chan Dunn Egan Flynn Gill Hale Ince Judd Kane Lyons Mills Nolan Oneal Page "
    "Quade Rowe Sykes Teague Usher Vint Wade Yoon Zorn Amos Birch Crane Dyer Eaton Finch Gale Hart Imes Jarvis"
).split()
ORG_KINDS = ("Bakery", "Studio", "Clinic", "Garage", "Books", "Partners")
VERBS = ("likes", "is learning", "plans to visit", "bought", "recommended", "is allergic to")
OBJECTS = (
    "sourdough bread",
    "the cello",
    "Lisbon",
    "an electric bike",
    "a hiking trip",
    "shellfish",
    "pour-over coffee",
    "bouldering",
    "Japanese lessons",
    "a vintage camera",
    "the Dolomites",
    "chamomile tea",
)
TOPICS = ("work", "a birthday", "travel plans", "a new recipe", "the garden", "a concert", "moving house")


@dataclass(frozen=True)
class Named:
    id: str
    name: str
    aliases: tuple[str, ...]
    kind: str  # person or organization


def synthetic_entities(n: int, seed: int = 0) -> list[Named]:
    """``n`` distinct entities: people "First Last" (a third with their first name as an alias, which many
    share, as in a real address book) and, one in ten, organisations named after a family ("Novak Bakery")."""
    rng = random.Random(seed)
    people = [f"{f} {last}" for last in LAST for f in FIRST]
    rng.shuffle(people)
    out: list[Named] = []
    orgs = 0
    for i in range(n):
        if i % 10 == 9:
            name = f"{LAST[orgs % len(LAST)]} {ORG_KINDS[(orgs // len(LAST)) % len(ORG_KINDS)]}"
            orgs += 1
            out.append(Named(f"ent_{i}", name, (), "organization"))
            continue
        name = people[i % len(people)]
        if i >= len(people):
            name = f"{name} {i // len(people) + 1}"
        aliases = (name.split()[0],) if i % 3 == 0 else ()
        out.append(Named(f"ent_{i}", name, aliases, "person"))
    return out


def sessions_for(entities: Sequence[Named], n_sessions: int) -> list[dict[str, Any]]:
    """Sessions whose first user turn names the entities of its facts (entity i is talked about in session
    i mod n_sessions), with an assistant reply and a second exchange on a topic."""
    by_session: dict[int, list[Named]] = {}
    for i, e in enumerate(entities):
        by_session.setdefault(i % n_sessions, []).append(e)
    out = []
    for s in range(n_sessions):
        named = by_session.get(s, [])[:6]
        first = "I caught up with " + ", ".join(e.name for e in named) + "." if named else "Quiet day today."
        topic = TOPICS[s % len(TOPICS)]
        out.append(
            {
                "session_id": f"s{s:05d}",
                "date": (START + timedelta(hours=6 * s)).isoformat(),
                "messages": [
                    {"role": "user", "content": first},
                    {"role": "assistant", "content": "Sounds like a good catch-up. Anything to remember?"},
                    {"role": "user", "content": f"We mostly talked about {topic}."},
                    {"role": "assistant", "content": f"Noted: {topic}."},
                ],
            }
        )
    return out


def graph_export(mem: Memory, entities: Sequence[Named], n_sessions: int) -> ScopeExport:
    """The stored sessions (their message ids) with the entities, two facts each and an event for every fifth,
    sourced from the user turn of the session that names them."""
    stored = mem.export_scope(SCOPE).sessions
    by_id = {s.id: s for s in stored}
    facts: list[Fact] = []
    events: list[ExportedEvent] = []
    for i, e in enumerate(entities):
        session = by_id[f"s{i % n_sessions:05d}"]
        source = [session.messages[0].id or ""]
        at = session.started_at
        for j in range(2):
            obj = OBJECTS[(i * 7 + j * 3) % len(OBJECTS)]
            facts.append(
                Fact(
                    id=f"f_{i}_{j}",
                    text=f"{e.name} {VERBS[(i + j) % len(VERBS)]} {obj}",
                    recorded_at=at,
                    valid_from=at,
                    session_id=session.id,
                    message_ids=source,
                    entity_ids=[e.id],
                )
            )
        if i % 5 == 0:
            events.append(
                ExportedEvent(
                    id=f"e_{i}",
                    subject=e.name,
                    verb="moved",
                    object="house",
                    text=f"{e.name} moved house",
                    time_start=at,
                    session_id=session.id,
                    message_ids=source,
                    subject_ids=[e.id],
                )
            )
    return ScopeExport(
        sessions=list(stored),
        entities=[Entity(id=e.id, name=e.name, type=e.kind, aliases=list(e.aliases)) for e in entities],
        facts=facts,
        events=events,
    )


def questions(entities: Sequence[Named], n: int, seed: int = 1) -> list[str]:
    """``n`` questions: by full name, by a (shared) first-name alias, about an organisation, and one in five
    naming no entity."""
    rng = random.Random(seed)
    people = [e for e in entities if e.kind == "person"]
    aliased = [e for e in people if e.aliases]
    orgs = [e for e in entities if e.kind == "organization"]
    out = []
    for i in range(n):
        shape = i % 5
        if shape == 0:
            out.append(f"What does {rng.choice(people).name} like these days?")
        elif shape == 1 and aliased:
            out.append(f"What did {rng.choice(aliased).aliases[0]} recommend to me?")
        elif shape == 2 and orgs:
            out.append(f"Did I ever go to {rng.choice(orgs).name}?")
        elif shape == 3:
            e = rng.choice(people)
            out.append(f"When did {e.name} move house, and what is {e.name.split()[0]} learning?")
        else:
            out.append(f"What did we talk about regarding {rng.choice(TOPICS)}?")
    return out


def full_scan_lookup(db: ScopeDatabase, query: str) -> list[str]:
    """Entity lookup as ``retrieve.graph.entities_named_in`` did it up to 4560ba3: every entity read, every name
    normalized in Python."""
    padded = f" {normalize_name(query)} "
    rows = db.query(
        "MATCH (sc:Scope {key: $scope}) MATCH (sc)-[:OWNS]->(e:Entity) RETURN e.id, e.name, e.aliases"
    )
    return sorted(
        eid
        for eid, name, aliases in rows
        if any(len(k) >= 3 and f" {k} " in padded for k in match_keys(name, list(aliases or [])))
    )


def indexed_lookup() -> Callable[[ScopeDatabase, str], list[str]] | None:
    """``store.mentions.entities_named_in`` where this checkout has it."""
    try:
        module = importlib.import_module("graphrecall.store.mentions")
    except ImportError:
        return None
    fn: Callable[[ScopeDatabase, str], list[str]] = module.entities_named_in
    return fn


def time_searches(
    mem: Memory,
    qs: Sequence[str],
    repeats: int,
    searches: dict[str, list[dict[str, Any]]],
    scope: Scope = SCOPE,
) -> dict[str, Any]:
    """Wall time and graph-stage time per search (after one warm-up pass), and each question's hits."""
    retriever = testing.retriever(mem)
    cutoff = mem.recall(scope, QUESTION_DATE).cutoff
    total: list[float] = []
    graph: list[float] = []
    with testing.database(mem, scope) as db:
        for i, question in enumerate(qs):  # warm-up: query vectors into the cache, pages into memory
            hits = retriever.search(db, question, K, cutoff=cutoff)
            tag = "entities" if scope == SCOPE else scope.user_id
            searches[f"{tag}/q{i}#0:default"] = [rankings.hit_row(h) for h in hits]
        for _ in range(repeats):
            for question in qs:
                timings: dict[str, float] = {}
                t0 = time.perf_counter()
                retriever.search(db, question, K, cutoff=cutoff, timings=timings)
                total.append((time.perf_counter() - t0) * 1000)
                graph.append(sum(timings.get(name, 0.0) for name in GRAPH_STAGES))
    return {"search": summarize(total), "graph_stage": summarize(graph)}


GRAPH_STAGES = ("graph_early", "graph_vectors", "graph")
"""The graph lists' timed parts (``retrieve.lists.GraphLists``: before the query is embedded, its vector searches
on a worker, and the rest on the searching thread); a checkout before they were split times them all as "graph"."""


def time_end_to_end(
    root: Path, settings: Settings, spec: str, qs: Sequence[str], repeats: int
) -> dict[str, Any]:
    """``Memory.search`` as an application calls it, the query embedded by the model itself (no cache), both scopes
    alternating per question after a warm-up pass: what a user of each scope waits for."""
    ms: dict[str, list[float]] = {"extracted": [], "unextracted": []}
    with Memory.open(root, embedder=embedder_from_spec(spec), settings=settings) as mem:
        for question in qs:
            for scope in (SCOPE, PLAIN):
                mem.search(scope, question, K, question_date=QUESTION_DATE)
        for _ in range(repeats):
            for question in qs:
                for name, scope in (("extracted", SCOPE), ("unextracted", PLAIN)):
                    t0 = time.perf_counter()
                    mem.search(scope, question, K, question_date=QUESTION_DATE)
                    ms[name].append((time.perf_counter() - t0) * 1000)
    return {name: summarize(v) for name, v in ms.items()}


def time_lookups(mem: Memory, qs: Sequence[str], repeats: int) -> dict[str, Any] | None:
    indexed = indexed_lookup()
    if indexed is None:
        return None
    scan_ms: list[float] = []
    indexed_ms: list[float] = []
    named: list[int] = []
    differ: list[str] = []
    with testing.database(mem, SCOPE) as db:
        for _ in range(repeats):
            for question in qs:
                t0 = time.perf_counter()
                a = full_scan_lookup(db, question)
                t1 = time.perf_counter()
                b = indexed(db, question)
                t2 = time.perf_counter()
                scan_ms.append((t1 - t0) * 1000)
                indexed_ms.append((t2 - t1) * 1000)
                named.append(len(a))
                if a != b and question not in differ:
                    differ.append(question)
    return {
        "full_scan": summarize(scan_ms),
        "indexed": summarize(indexed_ms),
        "entities_named_mean": sum(named) / len(named),
        "questions_where_they_differ": differ,
    }


def time_adjacency_build(mem: Memory, repeats: int) -> dict[str, Any] | None:
    """``store.adjacency.build`` on the extracted scope, ``repeats`` times, where this checkout has it."""
    try:
        module = importlib.import_module("graphrecall.store.adjacency")
    except ImportError:
        return None
    ms: list[float] = []
    with testing.database(mem, SCOPE) as db:
        for _ in range(repeats):
            t0 = time.perf_counter()
            module.build(db)
            ms.append((time.perf_counter() - t0) * 1000)
    return summarize(ms)


def time_graph_launch(mem: Memory, qs: Sequence[str], repeats: int) -> dict[str, Any] | None:
    """The graph lists' fact and event vector searches started on a worker once the query is embedded
    (``GraphLists.launch``) against run inline by the graph lists themselves, both in this process, alternating per
    question (the order flipped every repeat), on the extracted scope and on the unextracted one; whether every
    search's hits are the same both ways. (The rest of the graph lists is split the same way in both: the part
    without a vector before the query is embedded, fusion on the searching thread.) None where this checkout has
    no ``launch``."""
    from graphrecall.retrieve import lists

    started = getattr(lists.GraphLists, "launch", None)
    if started is None:
        return None

    def inline(self: Any, s: Any) -> None:
        return None

    retriever = testing.retriever(mem)
    out: dict[str, Any] = {}
    try:
        for scope in (SCOPE, PLAIN):
            cutoff = mem.recall(scope, QUESTION_DATE).cutoff
            ms: dict[str, list[float]] = {"worker": [], "inline": []}
            same = 0
            with testing.database(mem, scope) as db:
                for question in qs:
                    seen = []
                    for fn in (started, inline):
                        lists.GraphLists.launch = fn  # type: ignore[method-assign]
                        seen.append(
                            [(h.id, h.score) for h in retriever.search(db, question, K, cutoff=cutoff)]
                        )
                    same += seen[0] == seen[1]
                for rep in range(repeats):
                    ways = [("worker", started), ("inline", inline)]
                    for question in qs:
                        for name, fn in ways if rep % 2 == 0 else ways[::-1]:
                            lists.GraphLists.launch = fn  # type: ignore[method-assign]
                            t0 = time.perf_counter()
                            retriever.search(db, question, K, cutoff=cutoff)
                            ms[name].append((time.perf_counter() - t0) * 1000)
            out["extracted" if scope == SCOPE else "unextracted"] = {
                "worker": summarize(ms["worker"]),
                "inline": summarize(ms["inline"]),
                "identical": same,
                "questions": len(qs),
            }
    finally:
        lists.GraphLists.launch = started  # type: ignore[method-assign]
    return out


LEVERS: tuple[tuple[str, int, bool], ...] = (
    ("as is", 3, False),
    ("oversample 2", 2, False),
    ("oversample 1", 1, False),
    ("fact vectors by exact scan, no HNSW graph", 3, True),
)
"""(name, ``GraphCandidates.oversample`` (``RetrievalConfig.graph_oversample``), fact/event vector search by the
exact scan instead of the HNSW graph): what ``--levers`` compares. The first is the library as it ships."""


def time_levers(root: Path, settings: Settings, spec: str, qs: Sequence[str], repeats: int) -> dict[str, Any]:
    """``Memory.search`` with the query embedded by the model, the levers left for issue 28's 1.2x (``LEVERS``) and
    the unextracted scope alternating per question in one process (the order rotated every repeat), and how many
    questions keep the shipped top 10 under each lever. Variants are switched on the facade's own retriever and
    vector index class, and put back after."""
    from graphrecall.index.vector import TieredVectorIndex

    shipped = TieredVectorIndex.search
    exact: dict[str, bool] = {"on": False}

    def search(self: TieredVectorIndex, vec: Any, k: int) -> list[tuple[str, float]]:
        return self.exact.search(vec, k) if exact["on"] else shipped(self, vec, k)

    ways: list[tuple[str, int, bool, Scope]] = [(n, o, e, SCOPE) for n, o, e in LEVERS]
    ways.append(("nothing extracted", 3, False, PLAIN))
    ms: dict[str, list[float]] = {name: [] for name, *_ in ways}
    top10: dict[str, dict[str, list[str]]] = {name: {} for name, *_ in ways}
    TieredVectorIndex.search = search  # type: ignore[method-assign]
    try:
        with Memory.open(root, embedder=embedder_from_spec(spec), settings=settings) as mem:
            graph = testing.retriever(mem).graph
            assert graph is not None
            for question in qs:  # warm-up
                for scope in (SCOPE, PLAIN):
                    mem.search(scope, question, K, question_date=QUESTION_DATE)
            for rep in range(repeats):
                order = ways[rep % len(ways) :] + ways[: rep % len(ways)]
                for question in qs:
                    for name, oversample, by_scan, scope in order:
                        graph.oversample, exact["on"] = oversample, by_scan
                        t0 = time.perf_counter()
                        hits = mem.search(scope, question, K, question_date=QUESTION_DATE)
                        ms[name].append((time.perf_counter() - t0) * 1000)
                        top10[name][question] = [h.id for h in hits[:10]]
            graph.oversample = LEVERS[0][1]
    finally:
        TieredVectorIndex.search = shipped  # type: ignore[method-assign]
    plain = summarize(ms["nothing extracted"])["p50_ms"]
    return {
        name: {
            **summarize(ms[name]),
            "ratio": summarize(ms[name])["p50_ms"] / plain,
            "same_top10": sum(top10[name][q] == top10["as is"][q] for q in qs),
            "questions": len(qs),
        }
        for name, *_ in ways
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    args.embed_cache.parent.mkdir(parents=True, exist_ok=True)
    embedder: Embedder = arguments.build_embedder(args.embedder, args.embed_cache)
    entities = synthetic_entities(args.entities)
    qs = questions(entities, args.questions)
    root = Path(tempfile.mkdtemp(prefix="perf-entities-"))
    searches: dict[str, list[dict[str, Any]]] = {}
    try:
        settings = Settings(root=root, buffer_pool_bytes=args.buffer_pool_mb << 20)
        with Memory.open(root, embedder=embedder, settings=settings) as mem:
            t0 = time.perf_counter()
            mem.add_sessions(SCOPE, sessions_for(entities, args.sessions))
            mem.import_scope(SCOPE, graph_export(mem, entities, args.sessions))
            mem.add_sessions(PLAIN, sessions_for(entities, args.sessions))  # the same chat, nothing extracted
            mem.flush()
            build_s = time.perf_counter() - t0
            stats = mem.stats(SCOPE)
            result: dict[str, Any] = {
                "commit": args.label or rankings.commit(),
                "entities": args.entities,
                "sessions": args.sessions,
                "rounds": stats.rounds,
                "facts": stats.facts,
                "events": stats.events,
                "questions": len(qs),
                "repeats": args.repeats,
                "embedder": embedder.id,
                "build_s": build_s,
                "latency": time_searches(mem, qs, args.repeats, searches),
                "latency_unextracted": time_searches(mem, qs, args.repeats, searches, PLAIN),
                "lookup": time_lookups(mem, qs, args.repeats),
                "adjacency_build": time_adjacency_build(mem, max(3, args.repeats)),
                "graph_launch": time_graph_launch(mem, qs, args.repeats) if args.launch_ab else None,
            }
        result["end_to_end"] = time_end_to_end(root, settings, args.embedder, qs, args.repeats)
        if args.levers:
            result["levers"] = time_levers(root, settings, args.embedder, qs, args.repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if isinstance(embedder, CachedEmbedder):
            embedder.close()
    rankings.write(
        args.out / "hits.json.gz",
        {"format": rankings.FORMAT, "commit": result["commit"], "k": K, "scopes": {}, "searches": searches},
    )
    return result


def markdown(r: dict[str, Any]) -> str:
    lat = r["latency"]
    lines = [
        f"## Entity expansion at {r['entities']:,} entities ({r['commit']})",
        "",
        f"{r['rounds']} rounds, {r['facts']} facts, {r['events']} events; {r['questions']} questions x "
        f"{r['repeats']} repeats, k = {K}, embedder {r['embedder']}.",
        "",
        "| | p50 ms | p95 ms |",
        "|---|---|---|",
        f"| search | {lat['search']['p50_ms']:.1f} | {lat['search']['p95_ms']:.1f} |",
        f"| graph lists' work (their stages summed) | {lat['graph_stage']['p50_ms']:.1f} | "
        f"{lat['graph_stage']['p95_ms']:.1f} |",
    ]
    plain = r.get("latency_unextracted")
    if plain:
        ratio = lat["search"]["p50_ms"] / plain["search"]["p50_ms"]
        lines += [
            f"| search, the same sessions with nothing extracted | {plain['search']['p50_ms']:.1f} | "
            f"{plain['search']['p95_ms']:.1f} |",
            "",
            f"Extracted / not extracted, search p50: **{ratio:.2f}x**.",
            "",
        ]
    e2e = r.get("end_to_end")
    if e2e:
        a, b = e2e["extracted"], e2e["unextracted"]
        lines += [
            "`Memory.search`, the query embedded by the model (no cache), both scopes alternating:",
            "",
            "| | p50 ms | p95 ms |",
            "|---|---|---|",
            f"| extracted | {a['p50_ms']:.1f} | {a['p95_ms']:.1f} |",
            f"| nothing extracted | {b['p50_ms']:.1f} | {b['p95_ms']:.1f} |",
            "",
            f"Extracted / not extracted, `Memory.search` p50: **{a['p50_ms'] / b['p50_ms']:.2f}x**.",
            "",
        ]
    build = r.get("adjacency_build")
    if build:
        lines += [
            f"Building the adjacency from Kuzu (store.adjacency, once per write of extracted memory): p50 "
            f"{build['p50_ms']:.1f} ms, p95 {build['p95_ms']:.1f} ms.",
            "",
        ]
    ab = r.get("graph_launch")
    if ab:
        lines += ["| search p50 / p95 ms | fact and event vector searches inline | on a worker (launch) | identical hits |",
                  "|---|---|---|---|"]  # fmt: skip
        for name, v in ab.items():
            lines.append(
                f"| {name} | {v['inline']['p50_ms']:.2f} / {v['inline']['p95_ms']:.2f} | "
                f"{v['worker']['p50_ms']:.2f} / {v['worker']['p95_ms']:.2f} | {v['identical']} of {v['questions']} |"
            )
        lines.append("")
    levers = r.get("levers")
    if levers:
        lines += [
            "The levers left for 1.2x, `Memory.search` alternating in one process (`--levers`):",
            "",
            "| | p50 ms | / nothing extracted | questions whose top 10 is the shipped one |",
            "|---|---:|---:|---:|",
        ]
        for name, v in levers.items():
            same = (
                f"{v['same_top10']} of {v['questions']}" if name != "nothing extracted" else "(another scope)"
            )
            lines.append(f"| {name} | {v['p50_ms']:.2f} | {v['ratio']:.2f}x | {same} |")
        lines.append("")
    look = r.get("lookup")
    if look:
        lines += [
            "| | p50 ms | p95 ms |",
            "|---|---|---|",
            f"| entity lookup, full scan (as before) | {look['full_scan']['p50_ms']:.1f} | "
            f"{look['full_scan']['p95_ms']:.1f} |",
            f"| entity lookup, key index (store.mentions) | {look['indexed']['p50_ms']:.1f} | "
            f"{look['indexed']['p95_ms']:.1f} |",
            "",
            f"Entities named per question: {look['entities_named_mean']:.1f} on average; questions where the two "
            f"lookups differ: {len(look['questions_where_they_differ'])}.",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.entities", description=__doc__.split("\n")[0])
    p.add_argument("--entities", type=int, default=10_000)
    p.add_argument("--sessions", type=int, default=500)
    p.add_argument("--questions", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--buffer-pool-mb",
        type=int,
        default=Settings().buffer_pool_bytes >> 20,
        help="Kuzu's buffer pool (default: the library's); the import of 10,000 entities in one transaction needs "
        "more than 256",
    )
    p.add_argument(
        "--launch-ab",
        action="store_true",
        help="also time the graph lists' fact and event vector searches on a worker against inline, alternating in "
        "this process",
    )
    p.add_argument(
        "--levers",
        action="store_true",
        help="also time the levers left for issue 28's 1.2x (fewer candidates per graph list, fact and event "
        "vectors by exact scan) against the library as it ships, alternating in one process",
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/perf-entities"))
    p.add_argument("--label", default=None, help="what the run measures (default: this checkout's commit)")
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    arguments.add_embedder_argument(p)
    args = p.parse_args(argv)
    this_run = Run.begin()
    result = run(args)
    save_report(args.out, "entities", result, markdown(result), this_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
