"""Consolidation: merge duplicate current facts, link events to the entities they name, summarize old periods.

Why: after months, extraction has stored the same fact several times in different words (each session is
versioned against the few most similar facts, and a rewording below the versioning threshold becomes NEW), and
small-model extraction leaves events unlinked from entities it resolved in the same breath. ``Memory.consolidate``
tidies that up, in three steps, all planned first (``Consolidator.plan``: reads and LLM calls, no writes) and then
written in one transaction (``Consolidator.apply``), so a dry run returns exactly the plan a real run writes:

1. **Duplicates.** Current facts are clustered (``extract.clusters``: same kind, a shared entity or none, the same
   normalized text or a cosine of at least ``ConsolidationConfig.min_similarity`` with an LLM,
   ``near_exact_similarity`` without). A cluster of identical texts merges without a call. With an LLM, every
   other cluster costs exactly one ``consolidate_facts`` call, which answers MERGE (which fact to keep, optionally
   a merged sentence) or SEPARATE; an invalid answer or a failed call leaves the cluster alone. Without an LLM
   only near-exact clusters exist, and the seed (most reinforced, then longest) is kept. A merge keeps one fact
   (or writes the merged sentence as a new fact), gives it the cluster's summed reinforcement, every source
   message, the latest ``last_seen`` and the earliest ``valid_from``, and supersedes the others (SUPERSEDES
   edges; nothing is deleted, ``history`` shows them).
2. **Event links.** An event whose text, subject or object names a stored entity (name or alias, as extraction
   matches them) gains the missing SUBJECT (when its subject names it) or OBJECT edge. No LLM.
3. **Summaries** (``summaries=True``, needs an LLM). Sessions are grouped into windows of
   ``summary_window_days``; each window that ended at least ``summary_min_age_days`` ago and has no summary yet
   costs one ``summarize_period`` call, and its answer becomes one dated fact (kind ``event``, id
   ``fsum_<start>_<days>d``, valid from the window's first session, recorded at its last, linked to every message
   of its sessions). The id makes a second run skip the window.

Cost is bounded: at most one call per cluster or window, and at most ``max_llm_calls`` per run (the rest is
counted in ``deferred``). A second run over an unchanged scope changes nothing (``extract.clusters`` says why for
merges; links and summaries are skipped once present), though with an LLM it asks again about clusters the model
kept separate.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, TypeVar

import numpy as np

from graphrecall.config import ConsolidationConfig
from graphrecall.embed.base import Embedder
from graphrecall.embed.profile import profile_of
from graphrecall.extract.clusters import (
    FactPoint,
    Window,
    duplicate_clusters,
    same_text,
    session_windows,
    summary_id,
)
from graphrecall.extract.schema import MergeDecision, PeriodSummaryAnswer
from graphrecall.llm import LLM, run_sync
from graphrecall.models import (
    Consolidation,
    EventLink,
    Fact,
    FactMerge,
    PeriodSummary,
    Scope,
    SeparateFacts,
)
from graphrecall.names import is_user, match_keys, normalize_name
from graphrecall.prompts import load_prompt
from graphrecall.store import consolidation as cq
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.text import index_terms

log = logging.getLogger(__name__)

T = TypeVar("T")
PURPOSES = ("consolidate_facts", "summarize_period")
USER_CHARS = 1_500  # per user message shown to the summary prompt
REPLY_CHARS = 300  # per assistant message: the user's words are what a summary of the user needs
ALL = 10**9


@dataclass
class ConsolidationPlan:
    """What a run writes (``write``: new facts and supersessions; ``folds``; ``links``) and what it reports."""

    write: fq.ExtractionWrite = field(default_factory=lambda: fq.ExtractionWrite(session_id="consolidate"))
    folds: list[cq.Fold] = field(default_factory=list)
    merges: list[FactMerge] = field(default_factory=list)
    separate: list[SeparateFacts] = field(default_factory=list)
    links: list[EventLink] = field(default_factory=list)
    summaries: list[PeriodSummary] = field(default_factory=list)
    deferred: int = 0
    errors: list[str] = field(default_factory=list)

    def result(self, scope: Scope, *, dry_run: bool, llm: LLM | None, since: int) -> Consolidation:
        """The report, with the cost of the LLM calls recorded after ``since`` (its usage's ``calls`` before)."""
        calls = [r for r in llm.usage.since(since) if r.purpose in PURPOSES] if llm is not None else []
        return Consolidation(
            llm_calls=len(calls),
            input_tokens=sum(r.input_tokens for r in calls),
            output_tokens=sum(r.output_tokens for r in calls),
            cost_usd=sum(r.cost_usd for r in calls),
            scope=scope,
            dry_run=dry_run,
            merges=self.merges,
            kept_separate=self.separate,
            event_links=self.links,
            summaries=self.summaries,
            deferred=self.deferred,
            errors=self.errors,
        )


class Consolidator:
    """Plans and applies one consolidation of one scope. Callers hold the scope's extraction lock, so no
    extraction versions facts against a half-consolidated store."""

    def __init__(
        self,
        embedder: Embedder,
        config: ConsolidationConfig | None = None,
        llm: LLM | None = None,
        *,
        max_tokens: int | None = 1024,
    ) -> None:
        self.embedder = embedder
        self.config = config or ConsolidationConfig()
        self.llm = llm
        self.max_tokens = max_tokens
        self._calls_left = self.config.max_llm_calls

    # -- planning (no writes) ------------------------------------------------------------------------------------
    def plan(self, db: ScopeDatabase, *, summaries: bool, now: datetime) -> ConsolidationPlan:
        plan = ConsolidationPlan()
        self._calls_left = self.config.max_llm_calls
        self._plan_merges(db, plan, now)
        self._plan_links(db, plan)
        if summaries:
            self._plan_summaries(db, plan, now)
        return plan

    def _budget(self, plan: ConsolidationPlan) -> bool:
        """Whether one more LLM call is allowed; counts a deferral when not."""
        if self._calls_left <= 0:
            plan.deferred += 1
            return False
        self._calls_left -= 1
        return True

    def _parse(self, prompt: str, schema: type[T], purpose: str) -> T:
        assert self.llm is not None
        parsed, _ = run_sync(
            self.llm.parse(prompt, schema, max_tokens=self.max_tokens, purpose=purpose)  # type: ignore[type-var]
        )
        return parsed

    def _plan_merges(self, db: ScopeDatabase, plan: ConsolidationPlan, now: datetime) -> None:
        facts = [
            f
            for f in fq.list_facts(db, as_of=None, include_superseded=False, limit=ALL, offset=0)
            if not f.id.startswith(fq.SUMMARY_PREFIX)
            and f.key is None  # a keyed fact changes only by its key
        ]
        vectors = cq.current_fact_vectors(db)
        facts = [f for f in facts if f.id in vectors]
        if len(facts) < 2:
            return
        threshold = profile_of(self.embedder).translate(  # written on the reference scale (embed.profile)
            self.config.min_similarity if self.llm is not None else self.config.near_exact_similarity
        )
        points = [
            FactPoint(f.id, f.text, f.kind.value, frozenset(f.entity_ids), f.reinforcement, f.recorded_at)
            for f in facts
        ]
        matrix = np.stack([vectors[f.id] for f in facts])
        for cluster in duplicate_clusters(points, matrix, threshold):
            members = [facts[i] for i in cluster]
            if same_text([points[i] for i in cluster]):
                self._merge(plan, members, members[0], None, "rule", "the same text", now)
            elif self.llm is None:
                self._merge(plan, members, members[0], None, "rule", "near-identical text", now)
            elif self._budget(plan):
                # the model sees the seed and its closest followers; the rest wait for the next run
                plan.deferred += len(members) > self.config.max_cluster
                self._ask_merge(plan, members[: self.config.max_cluster], now)

    def _ask_merge(self, plan: ConsolidationPlan, members: list[Fact], now: datetime) -> None:
        labels = {f"f{i + 1}": f for i, f in enumerate(members)}
        lines = []
        for lab, f in labels.items():
            seen = f.last_seen or f.recorded_at
            n = f.reinforcement
            when = f", last {seen:%Y-%m-%d}" if seen else ""
            lines.append(f"{lab}: {f.text} (seen {n} time{'s' if n != 1 else ''}{when})")
        prompt = load_prompt("consolidate_facts").render(kind=members[0].kind.value, facts="\n".join(lines))
        ids = [f.id for f in members]
        try:
            answer = self._parse(prompt, MergeDecision, "consolidate_facts")
        except Exception as e:  # a failed call or an unusable answer leaves the cluster as it is
            log.warning("consolidation: no decision for facts %s: %s", ids, e)
            plan.errors.append(f"facts {', '.join(ids)}: {type(e).__name__}: {e}"[:500])
            return
        if answer.decision == "SEPARATE":
            plan.separate.append(SeparateFacts(fact_ids=ids, reason=answer.reason))
            return
        keep = labels.get((answer.keep or "").strip().lower())
        if keep is None:
            if answer.keep is not None:
                log.info(
                    "consolidation: the model kept %r, not one of %s; the first fact kept", answer.keep, ids
                )
            keep = members[0]
        self._merge(plan, members, keep, answer.text, "llm", answer.reason, now)

    def _merge(
        self,
        plan: ConsolidationPlan,
        members: Sequence[Fact],
        keep: Fact,
        text: str | None,
        by: Literal["rule", "llm"],
        reason: str,
        now: datetime,
    ) -> None:
        ordered = [keep, *[f for f in members if f.id != keep.id]]
        total = sum(f.reinforcement for f in ordered)
        mids = list(dict.fromkeys(m for f in ordered for m in f.message_ids))
        seen = [d for f in ordered for d in (f.last_seen or f.recorded_at,) if d is not None]
        last_seen = max(seen) if seen else None
        starts = [f.valid_from for f in ordered if f.valid_from is not None]
        valid_from = min(starts) if starts else None
        confidence = max(f.confidence for f in ordered)
        note = f"consolidate: {reason}"[:500] if reason else "consolidate: duplicate"
        text = " ".join(text.split()) if text else None
        if text is None or normalize_name(text) == normalize_name(keep.text):
            plan.folds.append(cq.Fold(keep.id, total, mids, last_seen, valid_from, confidence))
            for f in ordered[1:]:
                plan.write.supersessions.append(fq.Supersession(f.id, keep.id, _valid_to(f, now), now, note))
            plan.merges.append(
                FactMerge(kept_id=keep.id, text=keep.text, superseded=[f.id for f in ordered[1:]],
                          reinforcement=total, decided_by=by, reason=reason)
            )  # fmt: skip
            return
        latest = max(ordered, key=lambda f: (f.recorded_at or datetime.min, f.id))
        new_id = "f_" + hashlib.sha1("|".join(sorted(f.id for f in ordered)).encode()).hexdigest()[:16]
        plan.write.facts.append(
            fq.FactRow(
                id=new_id,
                text=text,
                terms=index_terms(text),
                kind=keep.kind.value,
                polarity=keep.polarity,
                confidence=confidence,
                valid_from=valid_from,
                recorded_at=latest.recorded_at,
                last_seen=last_seen,
                session_id=latest.session_id,
                message_ids=mids,
                entity_ids=list(keep.entity_ids),
                vec=self.embedder.embed([text])[0],
                reinforcement=total,
            )
        )
        for f in ordered:
            plan.write.supersessions.append(fq.Supersession(f.id, new_id, _valid_to(f, now), now, note))
        plan.merges.append(
            FactMerge(kept_id=new_id, text=text, superseded=[f.id for f in ordered], new_fact=True,
                      reinforcement=total, decided_by=by, reason=reason)
        )  # fmt: skip

    def _plan_links(self, db: ScopeDatabase, plan: ConsolidationPlan) -> None:
        entities = [e for e in fq.load_entities(db) if not is_user(e.name)]
        if not entities:
            return
        linked = fq.event_entities(db)
        for ev in fq.list_events(db, limit=ALL):
            have = set().union(*linked.get(ev.id, ([], [])))
            text = f" {normalize_name(f'{ev.text} {ev.subject} {ev.object}')} "
            subject = f" {normalize_name(ev.subject)} "
            for e in entities:
                if e.id in have:
                    continue
                keys = [k for k in match_keys(e.name, e.aliases) if len(k) >= 3]
                if not any(f" {k} " in text for k in keys):
                    continue
                role: Literal["subject", "object"] = (
                    "subject" if any(f" {k} " in subject for k in keys) else "object"
                )
                plan.links.append(EventLink(event_id=ev.id, entity_id=e.id, role=role))

    def _plan_summaries(self, db: ScopeDatabase, plan: ConsolidationPlan, now: datetime) -> None:
        cfg = self.config
        windows = session_windows(
            cq.all_sessions(db),
            window_days=cfg.summary_window_days,
            ended_by=now - timedelta(days=cfg.summary_min_age_days),
        )
        done = fq.existing_ids(db, "Fact", [summary_id(w) for w in windows])
        for w in windows:
            if summary_id(w) in done or not self._budget(plan):
                continue
            self._summarize(db, plan, w)

    def _summarize(self, db: ScopeDatabase, plan: ConsolidationPlan, w: Window) -> None:
        assert self.llm is not None
        end_day = w.end - timedelta(days=1)
        blocks: list[str] = []
        used = 0
        dates: dict[str, datetime] = {}
        for sid in w.session_ids:
            msgs = q.session_messages(db, sid)
            if not msgs:
                continue
            dates[sid] = msgs[0].at
            lines = [f"Session {sid} ({msgs[0].at:%Y-%m-%d}):"]
            for m in msgs:
                limit = USER_CHARS if m.role == "user" else REPLY_CHARS
                body = " ".join(m.text.split())
                lines.append(f"{m.role}: {body[:limit]}{' [...]' if len(body) > limit else ''}")
            block = "\n".join(lines)
            if used + len(block) > self.config.summary_max_chars:
                blocks.append("[later sessions of this period left out]")
                break
            blocks.append(block)
            used += len(block)
        if not blocks:
            return
        prompt = load_prompt("summarize_period").render(
            start=f"{w.start:%Y-%m-%d}", end=f"{end_day:%Y-%m-%d}", sessions="\n\n".join(blocks)
        )
        try:
            answer = self._parse(prompt, PeriodSummaryAnswer, "summarize_period")
        except Exception as e:
            log.warning("consolidation: no summary for %s: %s", summary_id(w), e)
            plan.errors.append(f"summary {summary_id(w)}: {type(e).__name__}: {e}"[:500])
            return
        if not answer.summary:
            return
        session_ids = [sid for sid in w.session_ids if sid in dates]
        first, last = session_ids[0], session_ids[-1]
        fid = summary_id(w)
        plan.write.facts.append(
            fq.FactRow(
                id=fid,
                text=answer.summary,
                terms=index_terms(answer.summary),
                kind="event",
                polarity="positive",
                confidence=1.0,
                valid_from=dates[first],
                recorded_at=dates[last],
                last_seen=dates[last],
                session_id=last,
                message_ids=cq.message_ids_of(db, session_ids),
                entity_ids=[],
                vec=self.embedder.embed([answer.summary])[0],
            )
        )
        plan.summaries.append(
            PeriodSummary(fact_id=fid, start=w.start, end=w.end, session_ids=session_ids, text=answer.summary)
        )

    # -- writing ---------------------------------------------------------------------------------------------------
    def apply(self, db: ScopeDatabase, plan: ConsolidationPlan) -> None:
        """Write the plan in one transaction: new facts, folds, supersessions, event links."""
        if not (plan.write.facts or plan.write.supersessions or plan.folds or plan.links):
            return
        with db.write() as txn:
            fq.write_extraction(txn, plan.write, dim=self.embedder.dim)
            for f in plan.folds:
                cq.fold(txn, f)
            for link in plan.links:
                cq.link_event(txn, link.event_id, link.entity_id, link.role)


def _valid_to(f: Fact, now: datetime) -> datetime:
    """A merged duplicate was never a different truth: its valid time closes where it opened, so ``as_of``
    queries show the kept fact (valid from the cluster's earliest start) instead of both."""
    return f.valid_from or f.recorded_at or now
