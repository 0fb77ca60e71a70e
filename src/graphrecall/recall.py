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
from graphrecall.errors import InvalidInput, NotFound
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

    def scope(self, scope: Scope, cutoff: Cutoff, also: Sequence[str] = ()) -> ScopeRecall:
        """One question's view of ``scope``, read together with the shared scopes of its organisation named in
        ``also`` (their user ids, validated: ``params.SharedScopeName``)."""
        shared = [self._shared(scope, name) for name in dict.fromkeys(also)]
        return ScopeRecall(self, scope, cutoff, shared=[ScopeRecall(self, s, cutoff) for s in shared])

    @staticmethod
    def _shared(scope: Scope, user: str) -> Scope:
        if user == scope.user_id:
            raise InvalidInput(f"{user!r} is the scope being read", where="also")
        return Scope(org_id=scope.org_id, user_id=user)


class ScopeRecall:
    """One question's view of one scope (``read.access.MemoryAccess``): search, context, timeline, facts, all
    limited to what was recorded by ``cutoff.until``. A scope with no database reads as empty."""

    def __init__(
        self, recall: Recall, scope: Scope, cutoff: Cutoff, *, shared: Sequence[ScopeRecall] = ()
    ) -> None:
        self._recall = recall
        self.scope = scope
        self.cutoff = cutoff
        self.shared = tuple(shared)
        """Shared scopes read together with this one (``also``): their hits, facts and rounds join this scope's,
        each hit and profile item saying which scope it came from. Nothing is written through a view."""
        self._extracted: bool | None = None

    @property
    def question_date(self) -> datetime:
        return self.cutoff.question_date

    @property
    def has_extracted(self) -> bool:
        """Whether this scope (or a shared one read with it) holds facts or events; checked once."""
        return self._own_extracted or any(s._own_extracted for s in self.shared)

    @property
    def _own_extracted(self) -> bool:
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
            "graphrecall.search",
            {
                **telemetry.scope_attributes(self.scope),
                "graphrecall.k": k,
                "graphrecall.shared": len(self.shared),
            },
        ) as span:
            lists = [
                [_from(view.scope, h, shared=view is not self) for h in view._search(
                    query, k, kinds=kinds, time_range=time_range, as_of=as_of)]
                for view in (self, *self.shared)
            ]  # fmt: skip
            hits = lists[0] if not self.shared else _merge(lists, k)
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
        if not self._own_extracted:
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
        origin: dict[str, Scope] = {}  # fact and event ids of shared scopes -> their scope
        for view in (self, *self.shared):
            f, m, e = view._profile_inputs(as_of)
            facts += f
            mentions.update(m)
            events += e
            if view is not self:
                origin.update({x.id: view.scope for x in f})
                origin.update({x.id: view.scope for x, _ in e})
        # a fact disputed by feedback (and not confirmed since) by the profile's moment is left out: the profile
        # is what an assistant is told to take as true (store.feedback)
        facts = [f for f in facts if f.disputed_at is None or f.disputed_at > as_of]
        profile = build_profile(self.scope, as_of, facts, mentions, events, token_budget)
        if not origin:
            return profile
        sections = [
            s.model_copy(
                update={"items": [i.model_copy(update={"scope": origin.get(i.id)}) for i in s.items]}
            )
            for s in profile.sections
        ]
        return profile.model_copy(update={"sections": sections})

    def _profile_inputs(
        self, as_of: datetime
    ) -> tuple[list[Fact], dict[str, tuple[int, datetime | None]], list[tuple[Event, datetime]]]:
        """This scope's current facts, their mentions and its recent events, as the profile reads them."""
        if not self._own_extracted:
            return [], {}, []
        with self._recall.logs.reading(self.scope) as db:
            facts = fq.list_facts(
                db, as_of=None, include_superseded=False, limit=PROFILE_MAX_ITEMS, offset=0,
                until=self.cutoff.until,
            )  # fmt: skip
            mentions = fq.fact_mentions(db, [f.id for f in facts], until=self.cutoff.until)
            since = as_of - timedelta(days=RECENT_EVENT_DAYS)
            events = fq.events_since(db, since, until=self.cutoff.until, limit=PROFILE_MAX_ITEMS)
        return facts, mentions, events

    def rounds_between(self, start: datetime, end: datetime, limit: int) -> list[Round]:
        """Visible rounds dated between ``start`` and ``end``, oldest first (unflushed ones included), shared
        scopes' included."""
        found = self._rounds_between(start, end, limit) + [
            _qualified(view.scope, r) for view in self.shared for r in view._rounds_between(start, end, limit)
        ]
        return sorted(found, key=lambda r: (r.at, r.session_id, r.idx))[:limit]

    def _rounds_between(self, start: datetime, end: datetime, limit: int) -> list[Round]:
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
        rounds past the cutoff are left out, so an id seen elsewhere cannot reach past it. An id this scope does not
        hold is looked up in the shared scopes, in the order given (the user's own round wins a clash)."""
        found: dict[str, Round] = {r.id: r for r in self._rounds([i for i in ids if SHARED_ID_SEP not in i])}
        for view in self.shared:
            prefix = f"{view.scope.user_id}{SHARED_ID_SEP}"
            mine = [i.removeprefix(prefix) for i in ids if i.startswith(prefix)]
            found.update({f"{prefix}{r.id}": _qualified(view.scope, r) for r in view._rounds(mine)})
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def _rounds(self, ids: Sequence[str]) -> list[Round]:
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
        found: list[Event] = []
        for view in (self, *self.shared):
            if view._own_extracted:
                with self._recall.logs.reading(view.scope) as db:
                    found += fq.events_between(db, start, end, until=self.cutoff.until, limit=limit)
        if not self.shared:
            return found
        return sorted(found, key=lambda e: (e.time_start or datetime.min, e.id))[:limit]

    def facts(self, as_of: datetime | None, limit: int) -> list[Fact]:
        """Facts current at the cutoff, or valid at ``as_of`` (default: the question date) among those recorded
        by then; the shared scopes' after this scope's."""
        found: list[Fact] = []
        for view in (self, *self.shared):
            if view._own_extracted and len(found) < limit:
                with self._recall.logs.reading(view.scope) as db:
                    found += fq.list_facts(
                        db,
                        as_of=as_of or self.cutoff.question_date,
                        include_superseded=False,
                        limit=limit - len(found),
                        offset=0,
                        until=self.cutoff.until,
                    )
        return found


def _merge(lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Hits of several scopes as one ranking. Each scope's scores are fused on the same RRF scale
    (``retrieve.fusion``), so they are merged by score, the user's own first on a tie, and ranked 1..k."""
    merged = sorted(
        ((h, i, j) for i, hits in enumerate(lists) for j, h in enumerate(hits)),
        key=lambda t: (-t[0].score, t[1], t[2]),
    )[:k]
    return [h.model_copy(update={"rank": n}) for n, (h, _, _) in enumerate(merged, start=1)]


SHARED_ID_SEP = "/"
"""Joins a shared scope's user id to the ids of its hits and rounds (``_team/s1@0``): identifiers never hold it
(``models.validate_identifier``), so a qualified id cannot be mistaken for one of the user's own."""


def _from(scope: Scope, hit: Hit, *, shared: bool) -> Hit:
    """``hit`` saying which scope it came from. A shared scope's hit also has its id and session id qualified by
    the scope (``_team/s1@0``, ``_team/s1``): ids stay unique in the merged ranking, the context heads its session
    with the scope's name, and the Reader's lookups by id (``rounds``) reach the right scope."""
    if not shared:
        return hit.model_copy(update={"scope": scope})
    prefix = f"{scope.user_id}{SHARED_ID_SEP}"
    return hit.model_copy(
        update={"scope": scope, "id": prefix + hit.id, "session_id": prefix + hit.session_id}
    )


def _qualified(scope: Scope, r: Round) -> Round:
    prefix = f"{scope.user_id}{SHARED_ID_SEP}"
    return r.model_copy(update={"id": prefix + r.id, "session_id": prefix + r.session_id})
