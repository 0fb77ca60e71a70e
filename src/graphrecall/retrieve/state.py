"""What one search knows as it goes: the question, the lists generated so far, the rounds read, the fused order.

``HybridRetriever.search`` makes one per call; the candidate generators (``retrieve.lists``) and the post-fusion
stages (``retrieve.post``) read and fill it in. It holds data and the reads every part needs alike (rounds by id,
stored vectors, the rounds inside the question's time range); what to do with them is decided in those modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.config import ListName, RetrievalConfig
from graphrecall.dates import Cutoff
from graphrecall.embed.base import Vectors
from graphrecall.models import Round, TimeRange
from graphrecall.retrieve.fusion import Ranked
from graphrecall.retrieve.graph import Early, GraphCandidates, Hits
from graphrecall.retrieve.intent import Cues
from graphrecall.retrieve.rerank import Reranker
from graphrecall.retrieve.stages import StageRunner, stage
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.wal import TailSnapshot
from graphrecall.store.wal.tail import Side


@dataclass
class SearchState:
    db: ScopeDatabase
    query: str
    k: int  # hits wanted
    n: int  # candidates per list: max(config.candidates, k)
    config: RetrievalConfig
    run: StageRunner
    cues: Cues
    cutoff: Cutoff | None
    as_of: datetime | None
    time_range: TimeRange | None  # given, or parsed from the question relative to the cutoff's question date
    tail: TailSnapshot | None  # the write log's unflushed rounds; None when it holds nothing
    use_index: bool
    graph: GraphCandidates | None
    reranker: Reranker | None
    similarity: Callable[[float], float] = (
        float  # a threshold of the config on the embedder's scale (embed.profile)
    )
    lexical: str | None = (
        None  # the question as its lexical lists read it, when not ``query`` (``lexical_query``)
    )
    qvec: Vectors | None = None  # the question's vector, once embedded
    pending: dict[ListName, Future[Ranked]] = field(default_factory=dict)  # store queries started early
    graph_early: Future[Early] | None = None  # the graph lists' reads that need no query vector
    graph_vectors: Future[tuple[Hits, Hits]] | None = None  # their fact and event vector searches
    lists: dict[ListName, Ranked] = field(default_factory=dict)
    signals: dict[ListName, dict[str, float]] = field(default_factory=dict)  # per list: round id -> its score
    pool: dict[str, Round] = field(default_factory=dict)  # rounds read while generating, reused for the hits
    fused: dict[str, float] = field(default_factory=dict)  # round id -> fused score (time boost included)
    ranked: Ranked = field(default_factory=list)  # the order the hits take, best first
    rounds: dict[str, Round] = field(default_factory=dict)  # the rounds of ``ranked``
    rerank_scores: dict[str, float] = field(default_factory=dict)
    _in_range: set[str] | None = None

    @property
    def timings(self) -> dict[str, float] | None:
        return self.run.timings

    @property
    def lexical_query(self) -> str:
        """The question as the BM25 lists read it: without the words by which it says "now"
        (``intent.without_now_cue``)."""
        return self.query if self.lexical is None else self.lexical

    @property
    def vector(self) -> Vectors:
        """The question's vector; generators that need it run after the query is embedded."""
        if self.qvec is None:
            raise RuntimeError("the query is not embedded yet")
        return self.qvec

    def add(self, name: ListName, ranked: Ranked, scores: dict[str, float] | None = None) -> None:
        """A generated list, and the scores its hits show as signal ``name`` (by default the list's own)."""
        self.lists[name] = ranked
        self.signals[name] = dict(ranked) if scores is None else scores

    def ordered_lists(self) -> dict[str, Ranked]:
        """The lists generated so far in ``ListName`` order: the order fusion reads them (float sums depend on it),
        whatever order they were generated in."""
        return {name: self.lists[name] for name in ListName if name in self.lists}

    def read_rounds(self, ids: Sequence[str]) -> None:
        """Rounds of ``ids`` into ``pool``: those not there yet are read from Kuzu (or the derived payloads)."""
        self.pool.update(self.run.fetch_rounds(self.db, [rid for rid in ids if rid not in self.pool]))

    def stored_vectors(self, ids: Sequence[str], side: Side) -> dict[str, Vectors]:
        """The stored user-side (or reply-side) vectors of these rounds: the tail's version where it holds one,
        else Kuzu's (from the derived index)."""
        vectors = self.tail.vectors(ids, side) if self.tail is not None else {}
        vectors.update(q.round_vectors(self.db, [rid for rid in ids if rid not in vectors], side))
        return vectors

    def in_range_ids(self) -> set[str]:
        """Ids of the visible rounds inside the question's time range (at most 5 x ``n`` from Kuzu, and the
        tail's); empty without a range or when neither the time boost nor the in-range list is on. Read once."""
        if self._in_range is None:
            self._in_range = self._read_in_range()
        return self._in_range

    def _read_in_range(self) -> set[str]:
        tr, cfg = self.time_range, self.config
        if tr is None or not (cfg.time_boost > 0 or cfg.in_range_weight > 0):
            return set()
        with stage(self.timings, "time_range"):
            until = self.cutoff.until if self.cutoff is not None else None
            found = set(q.rounds_between(self.db, tr.start, tr.end, limit=5 * self.n, until=until))
        if self.tail is not None:
            found -= self.tail.shadowed
            found |= {
                r.id
                for r in self.tail.rounds()
                if tr.start <= r.at <= tr.end and (self.cutoff is None or self.cutoff.admits(r.at))
            }
        return found
