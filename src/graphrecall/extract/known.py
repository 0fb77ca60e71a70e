"""Facts an application already knows (a CRM field, a settings page, a form), added without a conversation.

Why not just write a row: a known fact must live by the same rules as an extracted one, or the profile and
search would show two current versions of the same truth. So it becomes the same ``FactRow`` extraction builds
(text, terms, vector, entities resolved onto the stored ones), is versioned against the current facts, and is
written by the same ``store.facts.write_extraction`` in one transaction. Versioning:

- with an LLM, exactly extraction's path (``Extractor.version_facts``: candidates, the same-text rule, one
  ``version_fact`` call);
- without one, ``versioning.same_fact_rule``: the same text (DUPLICATE) or a near-identical one (UPDATE) on a
  current fact of the same kind about the same entities; everything else is NEW;
- with a key (``add_fact(key=...)``), by the key alone, LLM or not (``keyed_verdict``): the current fact of the same
  kind and key is replaced (UPDATE), or reinforced by the same text (DUPLICATE). Keyed facts version only against
  keyed facts: an application that names its fields wants the same answer every time.

Entities are resolved without an LLM in both cases (exact names and aliases, then embedding similarity above
``entity_auto``, else a new entity of type ``thing``): an application names entities deliberately.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.embed.base import Embedder
from graphrecall.embed.profile import profile_of
from graphrecall.extract.entities import EntityResolver
from graphrecall.extract.extractor import ExtractionConfig, Extractor
from graphrecall.extract.versioning import Verdict, apply_verdicts, same_fact_rule
from graphrecall.names import is_user, normalize_name
from graphrecall.store import facts as fq
from graphrecall.store.database import ScopeDatabase
from graphrecall.text import index_terms


@dataclass
class KnownFact:
    """A fact as the application states it. ``recorded_at`` is when memory learned it (the source session's
    date, or now); ``valid_from`` when it became true (default: ``recorded_at``)."""

    text: str
    kind: str
    recorded_at: datetime
    session_id: str
    valid_from: datetime | None = None
    entities: list[str] = field(default_factory=list)
    key: str | None = None


@dataclass
class KnownFactPlan:
    """What adding one known fact writes (``write``), the row it built, and the versioning verdict."""

    write: fq.ExtractionWrite
    row: fq.FactRow
    verdict: Verdict


def plan_known_fact(
    db: ScopeDatabase,
    embedder: Embedder,
    fact: KnownFact,
    config: ExtractionConfig,
    *,
    extractor: Extractor | None = None,
) -> KnownFactPlan:
    """Build and version one known fact against ``db``; nothing is written (the caller writes ``plan.write``
    inside ``db.write()``, holding the scope's extraction lock so no extraction versions against it meanwhile)."""
    names = list(dict.fromkeys(n.strip() for n in fact.entities if n.strip() and not is_user(n)))
    vecs = embedder.embed([fact.text, *names])
    write = fq.ExtractionWrite(session_id=fact.session_id)
    scale = profile_of(embedder)  # the thresholds are on the reference scale (embed.profile)
    resolver = EntityResolver(
        fq.load_entities(db),
        auto=scale.translate(config.entity_auto),
        ambiguous=scale.translate(config.entity_ambiguous),
        new_id=lambda: f"e_{uuid.uuid4().hex[:16]}",
    )
    entity_ids = [resolver.resolve(n, "thing", [], v).entity.id for n, v in zip(names, vecs[1:], strict=True)]
    write.new_entities = [e for e in resolver.entities if not e.stored]
    write.alias_updates = [e for e in resolver.entities if e.stored and e.aliases_changed]
    row = fq.FactRow(
        id=f"f_{uuid.uuid4().hex[:16]}",
        text=fact.text,
        terms=index_terms(fact.text),
        kind=fact.kind,
        polarity="positive",
        confidence=1.0,
        valid_from=fact.valid_from or fact.recorded_at,
        recorded_at=fact.recorded_at,
        last_seen=fact.recorded_at,
        session_id=fact.session_id,
        message_ids=[],
        entity_ids=list(dict.fromkeys(entity_ids)),
        vec=vecs[0],
        key=fact.key,
    )
    if fact.key is not None:
        verdict = keyed_verdict(fact.text, fq.current_fact_with_key(db, fact.kind, fact.key, row.vec))
        apply_verdicts([row], [verdict], fact.recorded_at, write)
    elif extractor is not None:
        (verdict,) = extractor.version_facts(db, [row], fact.recorded_at, write)
    else:
        candidates = fq.current_facts_of_kind(db, fact.kind, row.vec)
        verdict = same_fact_rule(
            fact.text,
            row.entity_ids,
            candidates,
            min_similarity=scale.translate(config.known_fact_min_similarity),
        )
        apply_verdicts([row], [verdict], fact.recorded_at, write)
    return KnownFactPlan(write, row, verdict)


def keyed_verdict(text: str, current: fq.Candidate | None) -> Verdict:
    """A fact added with a key: the application has said which stored fact it replaces, so neither the LLM nor
    similarity decides (two values of one settings field can read alike or not at all)."""
    if current is None:
        return Verdict("NEW", by="key", reason="no current fact with this key")
    if normalize_name(current.text) == normalize_name(text):
        return Verdict("DUPLICATE", current, by="key", reason="the same text under the same key")
    return Verdict("UPDATE", current, by="key", reason="a new value for the same key")
