"""Fact versioning: is a new fact NEW, a DUPLICATE, an UPDATE or a CONTRADICTion of what is stored?

Candidates come from the store (current facts similar to the new one, overall or among facts about the same
entities). Exact restatements are settled here without a model; everything else with candidates goes to the LLM
in ONE batched call per session (the version_fact prompt lists every new fact with its own candidates), which
keeps the cost at one call however many facts a session yields. The model only ever sees short labels (n1, c1):
a label it invents is ignored and the fact treated as NEW, the safe default that never hides a stored fact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.extract.schema import Decision, VersionDecisions
from graphrecall.models import utcnow
from graphrecall.names import normalize_name
from graphrecall.store.facts import Candidate, ExtractionWrite, FactRow, Reinforcement, Supersession

log = logging.getLogger(__name__)


@dataclass
class NewFact:
    """A fact about to be stored, with the current facts it might restate or replace."""

    label: str
    text: str
    said_on: datetime
    candidates: list[Candidate] = field(default_factory=list)


@dataclass
class Verdict:
    decision: Decision
    target: Candidate | None = None
    reason: str = ""
    by: str = "llm"  # llm | rule | key (add_fact with a key) | default


# ask(rendered new_facts block) -> VersionDecisions; raises on LLM failure.
AskVersions = Callable[[str], VersionDecisions]


def _same_text(a: str, b: str) -> bool:
    return normalize_name(a) == normalize_name(b)


def render_batch(items: Sequence[NewFact]) -> tuple[str, dict[str, Candidate]]:
    """The ``new_facts`` block of the prompt, and the candidate labels it used."""
    labels: dict[str, Candidate] = {}
    by_id: dict[str, str] = {}
    lines: list[str] = []
    for it in items:
        lines.append(f"{it.label}: {it.text} (said on {it.said_on:%Y-%m-%d})")
        for c in it.candidates:
            lab = by_id.get(c.id)
            if lab is None:
                lab = f"c{len(labels) + 1}"
                labels[lab] = c
                by_id[c.id] = lab
            when = c.recorded_at or c.valid_from
            lines.append(
                f"    {lab}: {c.text} (recorded {when:%Y-%m-%d})" if when else f"    {lab}: {c.text}"
            )
    return "\n".join(lines), labels


def decide(
    items: Sequence[NewFact], ask: AskVersions | None, *, batch: int = 25
) -> tuple[dict[str, Verdict], int]:
    """A verdict for every item (keyed by label) and the number of LLM calls made.

    Items without candidates are NEW; a candidate with the same normalized text is a DUPLICATE (no call);
    the rest are asked in batches of ``batch``. Without ``ask`` everything undecided is NEW.
    """
    verdicts: dict[str, Verdict] = {}
    pending: list[NewFact] = []
    for it in items:
        if not it.candidates:
            verdicts[it.label] = Verdict("NEW", by="rule", reason="no similar current fact")
            continue
        same = next((c for c in it.candidates if _same_text(c.text, it.text)), None)
        if same is not None:
            verdicts[it.label] = Verdict("DUPLICATE", same, by="rule", reason="same text")
            continue
        pending.append(it)
    calls = 0
    for start in range(0, len(pending), batch):
        chunk = pending[start : start + batch]
        if ask is None:
            for it in chunk:
                verdicts[it.label] = Verdict("NEW", by="default", reason="no LLM for versioning")
            continue
        block, labels = render_batch(chunk)
        answer = ask(block)
        calls += 1
        for reason in answer.dropped:
            log.info("versioning: dropped invalid decision %s", reason)
        mine = {it.label: it for it in chunk}
        for d in answer.decisions:
            found = mine.get(d.fact.strip())
            if found is None:
                log.info("versioning: decision for unknown fact label %r ignored", d.fact)
                continue
            it = found
            if it.label in verdicts:
                continue  # the first decision for a fact wins
            if d.decision == "NEW":
                verdicts[it.label] = Verdict("NEW", reason=d.reason)
                continue
            target = labels.get((d.target or "").strip())
            if target is None or target.id not in {c.id for c in it.candidates}:
                log.info(
                    "versioning: %s for %s names %r, not one of its candidates; stored as NEW",
                    d.decision, it.label, d.target,
                )  # fmt: skip
                verdicts[it.label] = Verdict("NEW", by="default", reason=f"invalid target {d.target!r}")
                continue
            verdicts[it.label] = Verdict(d.decision, target, reason=d.reason)
        for it in chunk:
            verdicts.setdefault(it.label, Verdict("NEW", by="default", reason="no decision returned"))
    return verdicts, calls


def reinforced_confidence(old: float, new: float) -> float:
    """Confidence after hearing a fact again: closes half the remaining gap to 1, weighted by the new mention's
    own confidence. Monotone, bounded by 1, and a restatement never lowers it."""
    old = min(1.0, max(0.0, old))
    return min(1.0, old + (1.0 - old) * 0.5 * min(1.0, max(0.0, new)))


def apply_verdicts(
    rows: Sequence[FactRow],
    verdicts: Sequence[Verdict],
    said_on: datetime,
    write: ExtractionWrite,
    *,
    now: datetime | None = None,
) -> None:
    """Turn one verdict per new fact into what ``write`` stores: NEW and UPDATE/CONTRADICT facts are added, a
    DUPLICATE reinforces its target instead, and an UPDATE/CONTRADICT supersedes its target (``valid_to`` = the
    new fact's ``valid_from``, or ``said_on`` if that would precede the old fact). A target already changed by an
    earlier fact of the same batch is not changed twice (the later fact is stored as NEW)."""
    now = now or utcnow()
    superseded: set[str] = set()
    reinforced: dict[str, Reinforcement] = {}
    for v, row in zip(verdicts, rows, strict=True):
        target = v.target
        if v.decision == "DUPLICATE" and target is not None and target.id not in superseded:
            prev = reinforced.get(target.id)
            conf = reinforced_confidence(prev.confidence if prev else target.confidence, row.confidence)
            mids = (prev.message_ids if prev else []) + row.message_ids
            count = (prev.count if prev else 0) + 1
            reinforced[target.id] = Reinforcement(target.id, conf, said_on, mids, count)
            continue
        write.facts.append(row)
        if v.decision in ("UPDATE", "CONTRADICT") and target is not None:
            if target.id in superseded or target.id in reinforced:
                log.info("fact %s already changed in this batch; %s stored as NEW", target.id, row.id)
                continue
            old_from = target.valid_from or datetime.min
            valid_to = row.valid_from if row.valid_from and row.valid_from >= old_from else said_on
            reason = f"{v.decision.lower()}: {v.reason}"[:500]
            write.supersessions.append(Supersession(target.id, row.id, valid_to, now, reason))
            superseded.add(target.id)
    write.reinforcements = list(reinforced.values())


def same_fact_rule(
    text: str,
    entity_ids: Sequence[str],
    candidates: Sequence[tuple[Candidate, Sequence[str]]],
    *,
    min_similarity: float,
) -> Verdict:
    """Versioning without an LLM, for facts an application adds (``Memory.add_fact``): only a current fact of the
    same kind (``candidates`` holds only those) about exactly the same entities can be matched, and then only

    - the same normalized text: DUPLICATE (the stored fact is reinforced, as extraction does for a restatement);
    - cosine similarity >= ``min_similarity`` (``ExtractionConfig.known_fact_min_similarity``, 0.95): UPDATE, the
      new wording replaces the old one. 0.95 is where rewordings end with the bundled model: "The user is a
      vegetarian" vs "The user is vegetarian" 0.996, "... lives in Berlin now" 0.959, while real changes stay
      below ("has two kids" vs "has three kids" 0.902, "timezone Europe/Berlin" vs "Europe/Paris" 0.915).

    Everything else is NEW: without a model, telling a change from a second fact is guesswork, and a missed
    supersession costs less than a wrong one (which would hide a fact that is still true)."""
    mine = sorted(set(entity_ids))
    same = [c for c, ents in candidates if sorted(set(ents)) == mine]
    exact = next((c for c in same if _same_text(c.text, text)), None)
    if exact is not None:
        return Verdict("DUPLICATE", exact, by="rule", reason="same text, kind and entities")
    best = max(same, key=lambda c: c.similarity, default=None)
    if best is not None and best.similarity >= min_similarity:
        reason = f"near-identical (cosine {best.similarity:.3f}), same kind and entities"
        return Verdict("UPDATE", best, by="rule", reason=reason)
    return Verdict("NEW", by="rule", reason="no current fact of the same kind and entities says this")
