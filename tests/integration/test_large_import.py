"""An import too large for ``CREATE`` statements in one transaction: from ``ANCHORED_COPY_FROM`` rows, an anchored
table's rows go in by ``COPY`` and then get their ``OWNS`` edges one by one (Kuzu kept 30,000 created rows in the
transaction's memory and filled the buffer pool at commit). The scope then reads, searches and erases like any
other, and a neighbour in the same bucket sees none of it."""

from __future__ import annotations

from pathlib import Path

from benchmarks.perf import entities as bench

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.store.database import ANCHORED_COPY_FROM


def test_an_import_past_the_copy_threshold_is_whole_owned_and_apart(tmp_path: Path) -> None:
    named = bench.synthetic_entities(1_100)  # 2,200 facts (COPY), 1,100 entities and 220 events (CREATE)
    neighbour = Scope(org_id=bench.SCOPE.org_id, user_id="neighbour")
    settings = Settings(root=tmp_path, buckets_per_org=1)  # one bucket: the neighbour shares it
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        mem.add_sessions(bench.SCOPE, bench.sessions_for(named, 40))
        mem.add_sessions(neighbour, bench.sessions_for(named[:10], 2))
        doc = bench.graph_export(mem, named, 40)
        assert len(doc.facts) >= ANCHORED_COPY_FROM > len(doc.entities)
        result = mem.import_scope(bench.SCOPE, doc)
        assert result.facts == len(doc.facts)
        stats = mem.stats(bench.SCOPE)
        assert (stats.facts, stats.events, stats.entities) == (
            len(doc.facts),
            len(doc.events),
            len(doc.entities),
        )
        assert len(mem.facts(bench.SCOPE, limit=1000)) == 1000  # reached from the scope (OWNS)
        assert mem.facts(neighbour) == [] and mem.entities(neighbour) == []
        fact = doc.facts[7]
        assert fact.id in {h.id for h in mem.search(bench.SCOPE, fact.text, 5, kinds=("fact",))}
        assert [h for h in mem.search(neighbour, fact.text, 5, kinds=("fact",)) if h.kind == "fact"] == []
        mem.erase(bench.SCOPE, fact_ids=[f.id for f in doc.facts[:5]])
        assert mem.stats(bench.SCOPE).facts == len(doc.facts) - 5
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:  # durable
        assert mem.stats(bench.SCOPE).facts == len(doc.facts) - 5
