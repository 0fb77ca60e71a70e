"""A bucket worth compacting, for the compaction tests: several users in one bucket (``buckets_per_org=1``) with
everything a scope can hold (extracted facts with a supersession, events with subjects and objects, entities with a
relation, application facts, a long turn with passages), churned (sessions erased, a user erased whole) so that the
file holds much more than its rows; and what is compared before and after: every row and edge of the bucket, every
read of every user, and the users' derived index files. Extraction is scripted (``ScriptedLLM``) but runs for real
into Kuzu; vectors come from the hashing embedder."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.store import buckets, schema
from graphrecall.store.database import BucketDatabase

ORG = "acme"
ANN, BOB, DAN, EVE = (Scope(org_id=ORG, user_id=u) for u in ("ann", "bob", "dan", "eve"))
USERS = (ANN, BOB, DAN)  # eve is erased whole
DIM = 64
QUERIES = ("where does the user live", "dog walk bakery rye", "sister Ana Munich")
LONG = " ".join(
    f"Sentence {i} of a long message about the bakery on street {i}, the dog and the rye bread."
    for i in range(12)
)


def _extraction(messages: list[Any]) -> dict[str, Any]:
    text = "\n".join(m.content for m in messages)
    ids = sorted({w for w in text.replace(",", " ").split() if w.startswith("m") and w[1:].isdigit()})[
        :1
    ] or ["m1"]
    return {
        "facts": [{"text": "The user lives in Munich.", "kind": "attribute", "message_ids": ids, "about": ["Ana"]},
                  {"text": "Ana is the user's sister.", "kind": "relationship", "message_ids": ids, "about": ["Ana"]}],
        "events": [{"subject": "Ana", "verb": "visit", "object": "Munich", "text": "Ana visited the user in Munich.",
                    "time_start": "2024-01-05", "message_ids": ids}],
        "entities": [{"name": "Ana", "type": "person", "aliases": ["my sister"]}, {"name": "Munich", "type": "place"}],
        "relations": [{"source": "Ana", "relation": "lives in", "target": "Munich", "message_ids": ids}],
    }  # fmt: skip


def _versions(messages: list[Any]) -> dict[str, Any]:
    text = "\n".join(m.content for m in messages)
    labels = sorted(
        {w.strip(":.,") for w in text.split() if w.strip(":.,")[:1] == "n" and w.strip(":.,")[1:].isdigit()}
    )
    return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "test"} for n in labels]}


def open_memory(root: Path, **settings: Any) -> Memory:
    embedder = HashingEmbedder(DIM)
    embedder.max_tokens = 128  # type: ignore[attr-defined]  # a window, so that a long turn gets passages
    return Memory.open(
        root,
        embedder=embedder,
        llm=ScriptedLLM([Step("Extract four lists", _extraction), Step("New facts, each followed", _versions)],
                        ordered=False),
        extraction=ExtractionConfig(background=False),
        settings=Settings(root=root, buckets_per_org=1, **settings),
    )  # fmt: skip


def sessions(user: Scope, n: int, start: int = 0) -> list[dict[str, Any]]:
    t0 = datetime(2024, 1, 1)
    return [
        {
            "session_id": f"s{i}",
            "date": (t0 + timedelta(days=i)).isoformat(),
            "messages": [
                {
                    "role": "user",
                    "content": f"{user.user_id} day {i}: I walked the dog to bakery {i} for rye.",
                },
                {
                    "role": "assistant",
                    "content": f"Was bakery {i} the one with the sourdough, {user.user_id}?",
                },
            ],
        }
        for i in range(start, start + n)
    ]


def build(root: Path) -> None:
    with open_memory(root) as m:
        m.add_sessions(ANN, sessions(ANN, 6))
        m.add_session(ANN, [{"role": "user", "content": "My sister Ana lives in Munich."}], session_id="x1",
                      date="2024-02-01", extract=True)  # fmt: skip
        m.add_session(ANN, [{"role": "user", "content": LONG}, {"role": "assistant", "content": "Long indeed."}],
                      session_id="x2", date="2024-02-02")  # fmt: skip
        m.llm = None  # application facts by the rule
        m.add_fact(ANN, "The user's plan is Pro.", entities=["Globex"], source="crm")
        newer = m.add_fact(ANN, "The user's plan is Enterprise.", entities=["Globex"], source="crm").fact
        old = next(f for f in m.facts(ANN) if f.text == "The user's plan is Pro.")
        m.supersede(ANN, old.id, newer.id, reason="upgraded")
        for user in (BOB, DAN, EVE):
            m.add_sessions(user, sessions(user, 40))
        m.flush()  # every user in Kuzu (a small one lives in its write log until then)
        m.erase(DAN, session_ids=[f"s{i}" for i in range(30)])  # dead rows
        m.add_fact(BOB, "The user plays chess on Sundays.")
        m.forget(EVE)  # a user erased whole
        m.flush()


def bucket_path(root: Path) -> Path:
    found = buckets.manifest(root, ORG, f"hashing-{DIM}", DIM)
    assert found is not None
    return found.path(0)


def dump(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row (every column, keys included) and every edge (with its properties) of the bucket, sorted; opened
    like the store opens it (a compaction a killed process left is settled first)."""
    bucket = BucketDatabase(
        bucket_path(root), embedder_id=f"hashing-{DIM}", dim=DIM, buffer_pool_size=64 << 20
    )
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in ("Scope", *schema.SCOPE_TABLES):
            cols = schema.scope_columns() if table == "Scope" else ["key", *schema.column_names(table)]
            rows = bucket.query(f"MATCH (n:{table}) RETURN {', '.join(f'n.{c}' for c in cols)}")
            out[table] = sorted(tuple(json.dumps(v, default=str) for v in r) for r in rows)
        pairs = [(r, *(schema.rel_ends(r) or ("", ""))) for r in schema.rel_names()]
        for rel, src, dst in [*pairs, *(("OWNS", "Scope", t) for t in schema.ANCHORED)]:
            props = "".join(f", r.{p}" for p in schema.rel_props(rel)) if rel != "OWNS" else ""
            rows = bucket.query(f"MATCH (a:{src})-[r:{rel}]->(b:{dst}) RETURN a.key, b.key{props}")
            out[f"{rel}:{dst}"] = sorted(tuple(json.dumps(v, default=str) for v in r) for r in rows)
        return out
    finally:
        bucket.close()


def reads(m: Memory) -> dict[str, Any]:
    """Every read of every user: the export (every session, fact version, event, entity, relation), searches of
    each kind, facts with their history, events, entities, stats."""
    out: dict[str, Any] = {}
    for user in USERS:
        doc = m.export_scope(user).model_dump(mode="json")
        doc.pop("exported_at", None)
        out[f"{user.user_id}/export"] = doc
        for q in QUERIES:
            for kind in ("round", "fact", "event"):
                hits = m.search(user, q, k=10, kinds=[kind])
                out[f"{user.user_id}/search/{q}/{kind}"] = [h.model_dump(mode="json") for h in hits]
        out[f"{user.user_id}/facts"] = [
            f.model_dump(mode="json") for f in m.facts(user, include_superseded=True)
        ]
        out[f"{user.user_id}/events"] = [e.model_dump(mode="json") for e in m.events(user)]
        out[f"{user.user_id}/entities"] = [e.model_dump(mode="json") for e in m.entities(user)]
        out[f"{user.user_id}/stats"] = m.stats(user).model_dump(mode="json")
    return out


def index_files(root: Path) -> dict[str, str]:
    """Every file of the users' derived indexes, by path, with a digest of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.glob(f"{ORG}/*.kuzu.idx/**/*"))
        if p.is_file()
    }
