"""Retrieval over extracted memory: fact, event and entity-expansion candidates for ``HybridRetriever``.

Two outputs from the same candidates. Called by the retriever, the object returns ranked *round* ids
(the rounds whose messages a matching fact or event came from), so round search keeps its provenance and simply
gains a "the user's facts say this round matters" signal. ``node_hits`` returns the facts and events themselves
as ``Hit(kind="fact"|"event")`` for callers that ask for them (``Memory.search(kinds=...)``). Every read goes through
``store.adjacency`` (the graph around facts and events, in memory: no Kuzu statement on the search path unless a
write since the last search changed extracted memory), ``store.mentions`` and ``store.facts``: no query is written
here.

With ``RetrievalConfig.salience_weight`` > 0, fact hits (not rounds, not events) gain that weight times their
salience (``retrieve.salience``) in RRF rank-1 units: a weak prior for facts said often and lately.

Only what is visible at the question's cutoff counts (``store.visibility``): facts and events recorded later, and
supersessions recorded later, are ignored. Superseded facts are skipped unless ``as_of`` asks for the past, in
which case the facts valid at ``as_of`` (by valid time) are used instead. Entity expansion: entities whose name or
alias occurs in the query (``store.mentions``, which reads only the entities that can match) pull in their current
facts and events through ABOUT/SUBJECT/OBJECT edges, ranked by similarity to the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graphrecall.config import ListName
from graphrecall.dates import Cutoff
from graphrecall.embed.base import Vectors
from graphrecall.models import Hit, utcnow
from graphrecall.retrieve import fusion
from graphrecall.retrieve.fusion import Ranked
from graphrecall.retrieve.salience import DEFAULT_HALF_LIFE_DAYS, SalienceFacts, salience
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.adjacency import adjacency
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.mentions import entities_named_in
from graphrecall.text import query_terms

Hits = Sequence[tuple[str, float]]


@dataclass(frozen=True)
class Early:
    """The part of the graph lists that needs no query vector (``GraphCandidates.early``)."""

    extracted: bool  # False: the scope holds no fact or event, and the graph lists are empty
    fact_bm25: Hits = ()
    event_bm25: Hits = ()
    named_facts: Sequence[str] = ()  # the visible facts about the entities the question names
    named_events: Sequence[str] = ()  # the visible events involving them


class GraphCandidates:
    """Callable as a candidate generator; ``node_hits`` for fact/event hits. Stateless apart from settings."""

    def __init__(
        self,
        *,
        rrf_k: int,
        query_stopwords: bool = True,
        oversample: int = 3,
        salience_weight: float = 0.0,
        salience_half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    ) -> None:
        """``rrf_k``, ``query_stopwords`` and the salience knobs are the retriever's (``RetrievalConfig``), so fact
        and event search treat a question the way round search does."""
        self.rrf_k = rrf_k
        self.query_stopwords = query_stopwords
        self.oversample = oversample
        self.salience_weight = salience_weight
        self.salience_half_life_days = salience_half_life_days

    # -- as a generator of round candidates ------------------------------------------------------------------------
    def early(
        self,
        db: ScopeDatabase,
        query: str,
        n: int,
        cutoff: Cutoff | None,
        as_of: datetime | None,
        *,
        named: bool = True,
    ) -> Early:
        """What the lists read without the query's vector: BM25 over facts and events, and (``named``) the
        visible facts and events of the entities the question names. The retriever runs it while the query is
        embedded; ``node_hits``, which expands no entity, asks without ``named``."""
        if not fq.has_extracted(db):
            return Early(extracted=False)
        m = n * self.oversample
        terms = query_terms(query, drop_query_stopwords=self.query_stopwords)
        until = cutoff.until if cutoff is not None else None
        named_ids = entities_named_in(db, query) if named else []
        facts, events = (
            adjacency(db).neighbourhood_ids(named_ids, until=until, as_of=as_of) if named_ids else ([], [])
        )
        return Early(
            extracted=True,
            fact_bm25=q.lexical_search(db, "fact_terms", terms, m),
            event_bm25=q.lexical_search(db, "event_terms", terms, m),
            named_facts=facts,
            named_events=events,
        )

    def vector_hits(self, db: ScopeDatabase, qvec: Vectors, n: int) -> tuple[Hits, Hits]:
        """The facts and events most similar to the query (before visibility): the part that needs its vector and
        no other list, so the retriever runs it on a worker once the query is embedded."""
        m = n * self.oversample
        return q.vector_search(db, "fact_vec", qvec, m), q.vector_search(db, "event_vec", qvec, m)

    def __call__(
        self,
        db: ScopeDatabase,
        query: str,
        qvec: Vectors,
        n: int,
        *,
        cutoff: Cutoff | None,
        as_of: datetime | None,
        early: Early | None = None,
        vectors: tuple[Hits, Hits] | None = None,
    ) -> dict[ListName, Ranked]:
        """The ``fact``, ``event`` and ``entity`` lists of round ids (each present only when not empty; no entity
        expansion when no fact or event is a candidate). ``early`` and ``vectors``: ``early`` and ``vector_hits``
        already run for this question (the retriever starts them on workers); read here when not given."""
        if early is None:
            early = self.early(db, query, n, cutoff, as_of)
        if not early.extracted:
            return {}
        facts, events = self._ranked(db, early, vectors or self.vector_hits(db, qvec, n), cutoff, as_of, n)
        if not facts and not events:
            return {}
        adj = adjacency(db)
        expanded = adj.rank_neighbourhood(early.named_facts, early.named_events, qvec, n, db.indexes.vectors)
        by_kind: dict[str, list[tuple[str, float]]] = {"fact": [], "event": []}
        for kind, node_id, sim in sorted(expanded, key=lambda x: -x[2]):
            by_kind[kind].append((node_id, sim))
        sources = {
            table: adj.source_rounds(table, dict.fromkeys(i for i, _ in [*direct, *by_kind[kind]]))
            for table, kind, direct in (("Fact", "fact", facts), ("Event", "event", events))
        }
        out: dict[ListName, Ranked] = {}
        if facts:
            out[ListName.fact] = _to_rounds(sources["Fact"], facts, n)
        if events:
            out[ListName.event] = _to_rounds(sources["Event"], events, n)
        if expanded:
            merged: dict[str, float] = {}
            for kind, table in (("fact", "Fact"), ("event", "Event")):
                for rid, s in _to_rounds(sources[table], by_kind[kind], n):
                    merged[rid] = max(merged.get(rid, -1.0), s)
            out[ListName.entity] = fusion.order(merged)[:n]
        return out

    def _ranked(
        self,
        db: ScopeDatabase,
        early: Early,
        vectors: tuple[Hits, Hits],
        cutoff: Cutoff | None,
        as_of: datetime | None,
        n: int,
    ) -> tuple[Ranked, Ranked]:
        """Visible facts and events ranked by RRF of their vector and BM25 lists (current facts only, or valid
        at as_of)."""
        until = cutoff.until if cutoff is not None else None
        adj = adjacency(db)
        out: list[Ranked] = []
        for table, vec, bm25 in (
            ("Fact", vectors[0], early.fact_bm25),
            ("Event", vectors[1], early.event_bm25),
        ):
            ids = list(dict.fromkeys([i for i, _ in vec] + [i for i, _ in bm25]))
            ok = (
                adj.visible_fact_ids(ids, until, as_of)
                if table == "Fact"
                else adj.visible_event_ids(ids, until, as_of)
            )
            lists = {"vector": [x for x in vec if x[0] in ok], "bm25": [x for x in bm25 if x[0] in ok]}
            out.append(fusion.order(fusion.fuse(lists, method="rrf", k=self.rrf_k))[:n])
        return out[0], out[1]

    # -- as facts and events themselves ------------------------------------------------------------------------------
    def node_hits(
        self,
        db: ScopeDatabase,
        query: str,
        qvec: Vectors,
        n: int,
        *,
        kinds: Sequence[str],
        cutoff: Cutoff | None,
        as_of: datetime | None = None,
    ) -> list[Hit]:
        """Fact and/or event hits, scored on the RRF scale that round hits use so the two can be merged."""
        early = self.early(db, query, n, cutoff, as_of, named=False)
        if not early.extracted:
            return []
        facts, events = self._ranked(db, early, self.vector_hits(db, qvec, n), cutoff, as_of, n)
        hits: list[Hit] = []
        for kind, table, ranked in (("fact", "Fact", facts), ("event", "Event", events)):
            if kind not in kinds or not ranked:
                continue
            nodes = fq.fetch_nodes(db, table, [i for i, _ in ranked])
            prior = (
                self._salience(db, [i for i, _ in ranked], cutoff)
                if kind == "fact" and self.salience_weight > 0
                else {}
            )
            for node_id, score in ranked:
                if node_id not in nodes:
                    continue
                text, sid, date, mids = nodes[node_id]
                signals = {kind: float(score)}
                if node_id in prior:
                    signals["salience"] = prior[node_id]
                    score += self.salience_weight * prior[node_id] / (self.rrf_k + 1)
                hits.append(
                    Hit(
                        id=node_id,
                        kind="fact" if kind == "fact" else "event",
                        text=text,
                        score=float(score),
                        signals=signals,
                        session_id=sid,
                        date=date,
                        message_ids=mids,
                    )
                )
        return hits

    def _salience(self, db: ScopeDatabase, ids: Sequence[str], cutoff: Cutoff | None) -> dict[str, float]:
        """Fact id -> salience as known at the cutoff: a fact with source messages counts the sessions recorded
        by then that said it, and the latest of them is its last sighting (so a restatement after the question
        date does not lift it); a fact without (added by the application) uses its stored count, and its stored
        ``last_seen`` when that is not after the question date."""
        now = cutoff.question_date if cutoff is not None else utcnow()
        until = cutoff.until if cutoff is not None else None
        stored = fq.salience_inputs(db, ids)
        said = fq.fact_mentions(db, ids, until=until)
        out: dict[str, float] = {}
        for fid, (last_seen, recorded_at, count) in stored.items():
            if fid in said:
                count, last_seen = said[fid]
            elif last_seen is not None and last_seen > now:
                last_seen = recorded_at
            seen = SalienceFacts(last_seen=last_seen, recorded_at=recorded_at, reinforcement=max(1, count))
            out[fid] = salience(seen, now, self.salience_half_life_days)
        return out


def _to_rounds(sources: dict[str, list[str]], ranked: Ranked, n: int) -> Ranked:
    """Each round scores as its best fact/event (ranked lists keep their order through fusion); ``sources``: fact or
    event id -> its rounds (``Adjacency.source_rounds``)."""
    best: dict[str, float] = {}
    for node_id, score in ranked:
        for rid in sources.get(node_id, []):
            if rid not in best:
                best[rid] = score
    return fusion.order(best)[:n]
