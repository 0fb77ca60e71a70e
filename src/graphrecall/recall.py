"""The recall service: everything that reads one scope's memory for a question, below the facade.

``Recall`` is built once per ``Memory`` and owns the retriever (with its graph candidates) over the shared pool of
scope databases. ``Recall.scope(scope, cutoff)`` gives a ``ScopeRecall``: one question's view of one scope, which
sees nothing recorded after its ``Cutoff``. ``Memory.search``, ``Memory.context`` and the Reader (through the
``read.access.MemoryAccess`` protocol, which ``ScopeRecall`` implements) all read through it, so the cutoff is
applied in one place for every kind of item and the Reader never reaches past it into the facade or the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from graphrecall import telemetry
from graphrecall.config import RetrievalConfig
from graphrecall.dates import Cutoff
from graphrecall.embed import Embedder
from graphrecall.errors import NotFound
from graphrecall.models import Context, Event, Fact, Hit, HitKind, Profile, Round, Scope, TimeRange
from graphrecall.retrieve import fusion
from graphrecall.retrieve.context import build_context, estimate_tokens
from graphrecall.retrieve.profile import RECENT_EVENT_DAYS, build_profile
from graphrecall.retrieve.rerank import Reranker
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool

PROFILE_SHARE = 3
"""``context(include_profile=True)`` gives the profile at most a third of the token budget; the evidence gets
the rest (and whatever the profile did not use)."""
PROFILE_MAX_ITEMS = 10_000  # facts (and events) read for one profile: far above any one user's current facts


class Recall:
    """Reads for every scope of a store root. Thread-safe: it holds settings, the pool does the rest."""

    def __init__(
        self,
        pool: DatabasePool,
        logs: ScopeLogs,
        embedder: Embedder,
        config: RetrievalConfig,
        reranker: Reranker | None = None,
    ) -> None:
        self.pool = pool
        self.logs = logs
        self.embedder = embedder
        self.config = config
        self.retriever = HybridRetriever(embedder, config, reranker)

    def cutoff(self, question_date: datetime | str | None) -> Cutoff:
        """The one cutoff for a question asked at ``question_date`` (``None``: now), with the configured slack."""
        return Cutoff.at(question_date, slack_hours=self.config.question_date_slack_hours)

    def scope(self, scope: Scope, cutoff: Cutoff) -> ScopeRecall:
        return ScopeRecall(self, scope, cutoff)


class ScopeRecall:
    """One question's view of one scope (``read.access.MemoryAccess``): search, context, timeline, facts, all
    limited to what was recorded by ``cutoff.until``. A scope with no database reads as empty."""

    def __init__(self, recall: Recall, scope: Scope, cutoff: Cutoff) -> None:
        self._recall = recall
        self.scope = scope
        self.cutoff = cutoff
        self._extracted: bool | None = None

    @property
    def question_date(self) -> datetime:
        return self.cutoff.question_date

    @property
    def has_extracted(self) -> bool:
        """Whether this scope holds facts or events; checked once."""
        if self._extracted is None:
            self._extracted = False
            try:
                with self._recall.logs.reading(self.scope) as db:
                    self._extracted = fq.has_extracted(db)
            except NotFound:
                pass
        return self._extracted

    def search(
        self,
        query: str,
        k: int,
        *,
        kinds: Sequence[HitKind] = ("round",),
        time_range: TimeRange | None = None,
        as_of: datetime | None = None,
    ) -> list[Hit]:
        """Rounds and/or fact/event hits; several kinds are merged by score (all on the RRF scale:
        ``fusion.interleave``) and ranked 1..k. Fact and event kinds are skipped when the scope has none."""
        with telemetry.span(
            "graphrecall.search", {**telemetry.scope_attributes(self.scope), "graphrecall.k": k}
        ) as span:
            hits = self._search(query, k, kinds=kinds, time_range=time_range, as_of=as_of)
            span.set_attribute("graphrecall.hits", len(hits))
            return hits

    def _search(
        self,
        query: str,
        k: int,
        *,
        kinds: Sequence[HitKind],
        time_range: TimeRange | None,
        as_of: datetime | None,
    ) -> list[Hit]:
        if not self.has_extracted:
            kinds = [x for x in kinds if x == "round"] or ["round"]
        retriever = self._recall.retriever
        tail = self._recall.logs.snapshot(self.scope)  # before Kuzu: a flush commits there first, then trims
        try:
            with self._recall.logs.reading(self.scope) as db:
                if tuple(kinds) == ("round",):
                    return retriever.search(
                        db, query, k, cutoff=self.cutoff, time_range=time_range, as_of=as_of, tail=tail
                    )
                hits: list[Hit] = []
                if "round" in kinds:
                    hits += retriever.search(
                        db, query, k, cutoff=self.cutoff, time_range=time_range, as_of=as_of, tail=tail
                    )
                if retriever.graph is not None:
                    qvec = self._recall.embedder.embed([query], kind="query")[0]
                    n = max(retriever.config.candidates, k)
                    hits += retriever.graph.node_hits(
                        db, query, qvec, n, kinds=kinds, cutoff=self.cutoff, as_of=as_of
                    )
        except NotFound:
            return []
        # Each kind's hits are already fused on the RRF scale: merged by score, not fused again.
        by_kind: dict[str, list[tuple[str, float]]] = {}
        for h in hits:
            by_kind.setdefault(h.kind, []).append((h.id, h.score))
        found: dict[tuple[str, str], Hit] = {(h.kind, h.id): h for h in hits}
        merged = fusion.interleave(by_kind)[:k]
        return [
            found[kind, hid].model_copy(update={"rank": i})
            for i, (kind, hid, _) in enumerate(merged, start=1)
        ]

    def context(self, query: str, token_budget: int, *, k: int, include_profile: bool = False) -> Context:
        """The best round hits that fit ``token_budget`` tokens, dated, grouped by session, chronological. With
        ``include_profile`` the profile comes first, fitted to a third of the budget (``PROFILE_SHARE``), and the
        evidence gets the rest: the whole text stays within ``token_budget``."""
        hits = self.search(query, k)
        if not include_profile:
            return build_context(query, hits, token_budget, question_date=self.cutoff.question_date)
        profile = self.profile(max(1, token_budget // PROFILE_SHARE))
        rest = token_budget - profile.token_count - (1 if profile.text else 0)  # 1: the joining newline
        if rest < 1:
            return Context(query=query, text=profile.text, hits=[], token_count=profile.token_count,
                           token_budget=token_budget, truncated=True, profile=profile)  # fmt: skip
        ctx = build_context(query, hits, rest, question_date=self.cutoff.question_date)
        text = f"{profile.text}\n{ctx.text}" if profile.text else ctx.text
        return ctx.model_copy(
            update={
                "text": text,
                "token_count": estimate_tokens(text),
                "token_budget": token_budget,
                "truncated": ctx.truncated or profile.truncated,
                "profile": profile,
            }
        )

    def profile(self, token_budget: int | None = None) -> Profile:
        """The user's current facts and recent events as of the cutoff's question date, grouped and ranked
        (``retrieve.profile``): facts recorded by the cutoff and not superseded by then, events whose session
        was. A scope with nothing extracted has an empty profile."""
        as_of = self.cutoff.question_date
        facts: list[Fact] = []
        events: list[tuple[Event, datetime]] = []
        mentions: dict[str, tuple[int, datetime | None]] = {}
        if self.has_extracted:
            with self._recall.logs.reading(self.scope) as db:
                facts = fq.list_facts(
                    db, as_of=None, include_superseded=False, limit=PROFILE_MAX_ITEMS, offset=0,
                    until=self.cutoff.until,
                )  # fmt: skip
                mentions = fq.fact_mentions(db, [f.id for f in facts], until=self.cutoff.until)
                since = as_of - timedelta(days=RECENT_EVENT_DAYS)
                events = fq.events_since(db, since, until=self.cutoff.until, limit=PROFILE_MAX_ITEMS)
        return build_profile(self.scope, as_of, facts, mentions, events, token_budget)

    def rounds_between(self, start: datetime, end: datetime, limit: int) -> list[Round]:
        """Visible rounds dated between ``start`` and ``end``, oldest first (unflushed ones included)."""
        tail = self._recall.logs.snapshot(self.scope)
        try:
            with self._recall.logs.reading(self.scope) as db:
                ids = q.rounds_between(db, start, end, limit=limit, until=self.cutoff.until)
                found = q.fetch_rounds(db, ids)
        except NotFound:
            return []
        rounds = {i: found[i] for i in ids if i in found}
        if tail is not None:
            rounds = {i: r for i, r in rounds.items() if i not in tail.shadowed}
            rounds.update(
                {r.id: r for r in tail.rounds() if start <= r.at <= end and self.cutoff.admits(r.at)}
            )
        return sorted(rounds.values(), key=lambda r: (r.at, r.session_id, r.idx))[:limit]

    def rounds(self, ids: Sequence[str]) -> list[Round]:
        """Rounds by id as recorded by the cutoff (unflushed ones included), in the order asked; unknown ids and
        rounds past the cutoff are left out, so an id seen elsewhere cannot reach past it."""
        wanted = list(dict.fromkeys(ids))
        tail = self._recall.logs.snapshot(self.scope)
        found: dict[str, Round] = {}
        try:
            with self._recall.logs.reading(self.scope) as db:
                found = q.fetch_rounds(db, wanted)
        except NotFound:
            pass
        if tail is not None:
            found = {i: r for i, r in found.items() if i not in tail.shadowed}
            found.update({r.id: r for r in tail.rounds() if r.id in set(wanted)})
        return [found[i] for i in wanted if i in found and self.cutoff.admits(found[i].at)]

    def events_between(self, start: datetime, end: datetime, limit: int) -> list[Event]:
        if not self.has_extracted:
            return []
        with self._recall.logs.reading(self.scope) as db:
            return fq.events_between(db, start, end, until=self.cutoff.until, limit=limit)

    def facts(self, as_of: datetime | None, limit: int) -> list[Fact]:
        """Facts current at the cutoff, or valid at ``as_of`` (default: the question date) among those recorded
        by then."""
        if not self.has_extracted:
            return []
        with self._recall.logs.reading(self.scope) as db:
            return fq.list_facts(
                db,
                as_of=as_of or self.cutoff.question_date,
                include_superseded=False,
                limit=limit,
                offset=0,
                until=self.cutoff.until,
            )
