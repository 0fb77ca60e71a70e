"""Candidate generators: the ranked lists of round ids one search fuses, each made by one declared object.

``GENERATORS`` lists them in the order they run; each names the lists it produces (``config.ListName``, also the
signal names on a ``Hit``), what it reads, whether a small scope weighs it less, and when a question leaves it
out. Fusion reads the lists in ``ListName`` order whatever order they were made in.

| list | generator | reads |
|---|---|---|
| vector | ``VectorList`` | ``round_user``, ``round_passage``, ``round_reply`` vector indexes (or exact scans), the tail |
| bm25 | ``Bm25List`` | the ``round_terms`` lexical index (started before the query is embedded) |
| bm25_tail | ``TailBm25List`` | the write log's unflushed rounds |
| bm25_user | ``UserSideList`` | the user's words in the pool: the best ``user_pool`` candidates of a first fusion |
| recency | ``RecencyList`` | the dates of the best ``recency_pool`` candidates of a first fusion |
| fact, event, entity | ``GraphLists`` | extracted memory (``retrieve.graph``) |
| in_range | ``InRangeList`` | the rounds dated inside the question's time range, their stored vectors |
| other_language | ``OtherLanguageList`` | the user side of the best ``user_pool`` dense candidates (rows in the pool) |

A generator whose lists all weigh 0 is not run. The per-question adjustments (``retrieve.intent.Cues``) sit beside
what they change: ``user_side_preferred`` (the user-side list and the reply penalty), ``RecencyList.wanted``
(questions about now); the post-fusion stages have their own (``retrieve.post``).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import ClassVar

import numpy as np

from graphrecall.config import ListName
from graphrecall.retrieve import fusion
from graphrecall.retrieve.fusion import Ranked
from graphrecall.retrieve.lexical import pool_bm25
from graphrecall.retrieve.stages import stage
from graphrecall.retrieve.state import SearchState
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.wal.tail import Side
from graphrecall.text import LATIN_LANGUAGES, language_of, query_terms


# -- per-question adjustments of the round lists ------------------------------------------------------------------
def user_side_preferred(s: SearchState) -> bool:
    """Whether the user's half of a round is where this question's evidence likely is: not for a question about
    what the assistant said (its evidence is in a reply), nor, with ``user_side="unless_about_others"``, for one
    about someone else (nothing says which half holds it). Otherwise the user-side list runs and reply similarity
    pays ``reply_penalty``."""
    if s.cues.about_assistant:
        return False
    return not (s.config.user_side == "unless_about_others" and s.cues.about_someone_else)


def reply_penalty(s: SearchState) -> float:
    """What a reply's similarity gives up against the user side's (``VectorList``, ``InRangeList``)."""
    return s.config.reply_penalty if user_side_preferred(s) else 0.0


# -- generators ---------------------------------------------------------------------------------------------------
class Generator:
    """A candidate generator. Subclasses declare ``produces`` and ``reads`` and implement ``generate``, which adds
    its lists to the state (``SearchState.add``)."""

    produces: ClassVar[tuple[ListName, ...]]
    reads: ClassVar[str]
    small_scope_weight: ClassVar[bool] = False  # weighs less in a scope of few rounds (``weights``)

    def wanted(self, s: SearchState) -> bool:
        """Whether this search runs it: by default when one of its lists weighs anything."""
        return any(s.config.weight(name) != 0 for name in self.produces)

    def prefetch(self, s: SearchState) -> None:
        """Starts the store queries that need no query vector, so that they run while the query is embedded."""

    def launch(self, s: SearchState) -> None:
        """Starts, once the query is embedded, work that needs its vector but no other list, so that it runs on a
        worker while the generators before it make theirs."""

    def generate(self, s: SearchState) -> None:
        raise NotImplementedError


class VectorList(Generator):
    """A round's score is the best of its user-side similarity, its best passage's less ``passage_penalty`` (a long
    user turn: ``passage_vectors``) and its reply's less ``reply_penalty``; the tail's rounds are scored alike
    and replace the Kuzu rows they rewrote. Its signal holds every round scored, not only the best ``n``."""

    produces = (ListName.vector,)
    reads = "round_user, round_passage and round_reply vector indexes (or exact scans); the tail's vectors"

    def generate(self, s: SearchState) -> None:
        vec = self._stored(s)
        if s.tail is not None:
            vec = self._with_tail(s, vec)
            s.pool.update(s.tail.get(list(vec)))
        s.add(ListName.vector, fusion.order(vec)[: s.n], vec)

    def _stored(self, s: SearchState) -> dict[str, float]:
        cfg, db, qvec, n, run = s.config, s.db, s.vector, s.n, s.run
        reply_job: Future[list[tuple[str, float]]] | None = None
        passage_job: Future[list[tuple[str, float]]] | None = None
        passages = cfg.passage_vectors and db.indexes.count("round_passage") > 0
        if s.use_index:
            if cfg.use_reply_vectors:
                reply_job = run.submit("vec_reply", q.vector_search, db, "round_reply", qvec, n)
            if passages:
                passage_job = run.submit("vec_passage", q.vector_search, db, "round_passage", qvec, n)
            with stage(run.timings, "vec_user"):
                user = q.vector_search(db, "round_user", qvec, n)
        else:
            if cfg.use_reply_vectors:
                reply_job = run.submit("scan_reply", q.exact_vector_search, db, "reply_embedding", qvec, n)
            if passages:
                passage_job = run.submit(
                    "scan_passage", q.exact_vector_search, db, "embedding", qvec, n, "Passage"
                )
            with stage(run.timings, "scan_user"):
                user = q.exact_vector_search(db, "embedding", qvec, n)
        reply = reply_job.result() if reply_job is not None else []
        penalty = reply_penalty(s)
        vec: dict[str, float] = {}
        for rid, score in user:
            vec[rid] = max(vec.get(rid, -1.0), score)
        if passage_job is not None:
            for rid, score in q.passage_scores(passage_job.result()).items():
                vec[rid] = max(vec.get(rid, -1.0), score - cfg.passage_penalty)
        for rid, score in reply:
            vec[rid] = max(vec.get(rid, -1.0), score - penalty)
        return vec

    def _with_tail(self, s: SearchState, vec: dict[str, float]) -> dict[str, float]:
        """Kuzu's scores without the rows the tail rewrote or deleted, plus the tail's: its cosine scores are
        Kuzu's measure, so they join by score."""
        assert s.tail is not None
        cfg = s.config
        merged = {rid: score for rid, score in vec.items() if rid not in s.tail.shadowed}
        for rid, score in s.tail.vector_search(
            s.vector, s.n, "user", passages=cfg.passage_vectors, passage_penalty=cfg.passage_penalty
        ):
            merged[rid] = max(merged.get(rid, -1.0), score)
        if cfg.use_reply_vectors:
            penalty = reply_penalty(s)
            for rid, score in s.tail.vector_search(s.vector, s.n, "reply"):
                merged[rid] = max(merged.get(rid, -1.0), score - penalty)
        return merged


class Bm25List(Generator):
    """BM25 over each round's terms (OR semantics; the question's words without content left out:
    ``query_stopwords``). Needs no embedding, so it starts before the query is embedded. Rows the tail rewrote
    or deleted are dropped."""

    produces = (ListName.bm25,)
    reads = "the round_terms lexical index"
    small_scope_weight = True

    def prefetch(self, s: SearchState) -> None:
        if self.wanted(s):
            terms = query_terms(s.lexical_query, drop_query_stopwords=s.config.query_stopwords)
            s.pending[ListName.bm25] = s.run.submit("bm25", q.lexical_search, s.db, "round_terms", terms, s.n)

    def generate(self, s: SearchState) -> None:
        ranked = s.pending.pop(ListName.bm25).result()
        if s.tail is not None:
            ranked = [(rid, score) for rid, score in ranked if rid not in s.tail.shadowed]
        s.add(ListName.bm25, ranked)


class TailBm25List(Generator):
    """BM25 over the write log's unflushed rounds with the tail's own statistics: a list of its own (not merged
    into ``bm25`` by score, since its IDF is counted over other documents), weighed like ``bm25``."""

    produces = (ListName.bm25_tail,)
    reads = "the write log's unflushed rounds"
    small_scope_weight = True

    def wanted(self, s: SearchState) -> bool:
        return s.tail is not None and super().wanted(s)

    def generate(self, s: SearchState) -> None:
        assert s.tail is not None
        ranked = s.tail.bm25_search(s.lexical_query, s.n, drop_query_stopwords=s.config.query_stopwords)
        s.pool.update(s.tail.get([rid for rid, _ in ranked]))
        s.add(ListName.bm25_tail, ranked)


def first_fusion(s: SearchState, size: int) -> list[str]:
    """Ids of the best ``size`` candidates by an RRF of the lists so far (whatever ``fusion`` the config names),
    their rounds read into the pool: what the pool generators re-rank."""
    fused = fusion.fuse(s.ordered_lists(), weights(s), method="rrf", k=s.config.rrf_k)
    ids = [rid for rid, _ in fusion.order(fused)[:size]]
    s.read_rounds(ids)
    return ids


class UserSideList(Generator):
    """BM25 over the user side of the best ``user_pool`` candidates so far (``retrieve.lexical``): what the user
    said in their own words, where a long reply on the same topic cannot crowd it out. Left out when the
    question's evidence is not likely on the user's side (``user_side_preferred``)."""

    produces = (ListName.bm25_user,)
    reads = "the user's words of the pool's rounds"
    small_scope_weight = True

    def wanted(self, s: SearchState) -> bool:
        return user_side_preferred(s) and super().wanted(s)

    def generate(self, s: SearchState) -> None:
        ids = first_fusion(s, s.config.user_pool)
        with stage(s.timings, "bm25_user"):
            ranked = pool_bm25(
                s.lexical_query,
                {rid: s.pool[rid].user_text for rid in ids if rid in s.pool},
                drop_query_stopwords=s.config.query_stopwords,
            )
        s.add(ListName.bm25_user, ranked)


class RecencyList(Generator):
    """The best ``recency_pool`` candidates so far, newest first: only rounds already relevant compete on date.
    Only for a question about how things are now (``Cues.about_now``), and only with ``recency_weight`` > 0."""

    produces = (ListName.recency,)
    reads = "the dates of the pool's rounds"

    def wanted(self, s: SearchState) -> bool:
        return s.cues.about_now and super().wanted(s)

    def generate(self, s: SearchState) -> None:
        ids = first_fusion(s, s.config.recency_pool)
        dated = sorted(
            (rid for rid in ids if rid in s.pool), key=lambda rid: (s.pool[rid].at, rid), reverse=True
        )
        s.add(ListName.recency, [(rid, float(len(dated) - i)) for i, rid in enumerate(dated)])


class GraphLists(Generator):
    """Rounds holding the sources of the best visible facts and events, and of the facts and events of the
    entities the question names (``retrieve.graph``)."""

    produces = (ListName.fact, ListName.event, ListName.entity)
    reads = "extracted memory: fact and event indexes, the entities named, their edges"
    small_scope_weight = True

    def wanted(self, s: SearchState) -> bool:
        return s.graph is not None and super().wanted(s)

    def prefetch(self, s: SearchState) -> None:
        # BM25 over facts and events and the entities the question names need no vector: read while it is embedded.
        assert s.graph is not None
        s.graph_early = s.run.submit("graph_early", s.graph.early, s.db, s.query, s.n, s.cutoff, s.as_of)

    def launch(self, s: SearchState) -> None:
        # The fact and event vector searches need the vector and no other list: on a worker they overlap the round
        # vector list (an extracted scope of 10,000 entities: docs/benchmarks.md).
        # A scope with no fact or event (the index counts answer at once) has nothing to search.
        assert s.graph is not None
        if fq.has_extracted(s.db):
            s.graph_vectors = s.run.submit("graph_vectors", s.graph.vector_hits, s.db, s.vector, s.n)

    def generate(self, s: SearchState) -> None:
        assert s.graph is not None
        early = s.graph_early.result() if s.graph_early is not None else None
        vectors = s.graph_vectors.result() if s.graph_vectors is not None else None
        s.graph_early = s.graph_vectors = None
        with stage(s.timings, "graph"):
            found = s.graph(
                s.db, s.query, s.vector, s.n, cutoff=s.cutoff, as_of=s.as_of, early=early, vectors=vectors
            )
        for name, ranked in found.items():
            s.add(name, ranked)


class InRangeList(Generator):
    """The rounds inside the question's time range ranked by similarity alone (the better of the user side and
    the reply less the reply penalty, as ``VectorList`` scores them; passages are not read): a question anchored
    in time ("the milestone I mentioned four weeks ago") has few candidates, and the best match among them may
    rank far down the whole scope's lists, where the time boost cannot reach it."""

    produces = (ListName.in_range,)
    reads = "the rounds dated inside the time range, their stored vectors"

    def wanted(self, s: SearchState) -> bool:
        return s.time_range is not None and super().wanted(s)

    def generate(self, s: SearchState) -> None:
        ids = s.in_range_ids()
        if not ids:
            return
        with stage(s.timings, "in_range"):
            ranked = self._ranked(s, sorted(ids))
            if s.tail is not None:  # Kuzu has no row for a round only the tail holds
                s.pool.update(s.tail.get([rid for rid, _ in ranked]))
        s.add(ListName.in_range, ranked)

    def _ranked(self, s: SearchState, ids: list[str]) -> Ranked:
        qv = np.asarray(s.vector, dtype=np.float32).reshape(-1)
        qv = qv / (float(np.linalg.norm(qv)) or 1.0)
        scores: dict[str, float] = {}
        sides: tuple[Side, ...] = ("user", "reply") if s.config.use_reply_vectors else ("user",)
        for side in sides:
            penalty = reply_penalty(s) if side == "reply" else 0.0
            for rid, v in s.stored_vectors(ids, side).items():
                v = np.asarray(v, dtype=np.float32).reshape(-1)
                score = float(v @ qv) / (float(np.linalg.norm(v)) or 1.0) - penalty
                scores[rid] = max(scores.get(rid, -2.0), score)
        return fusion.order(scores)


_LATIN = frozenset(("en", *LATIN_LANGUAGES))


def other_language(question: str, text: str) -> bool:
    """Whether ``text`` is written in another language than a question in language ``question`` (``language_of``).
    A script apart from the question's always is; between two Latin-script texts, only a text recognized as one of
    ``LATIN_LANGUAGES`` other than the question's: ``language_of`` says English also when it cannot tell (a short
    "Sí, claro"), so a text it calls English is never another language to a Latin-script question, and an English
    scope asked in English has no text in another language unless one is recognized as such."""
    lang = language_of(text)
    if lang == question:
        return False
    if lang in _LATIN and question in _LATIN:
        return lang != "en"
    return True


class OtherLanguageList(Generator):
    """The best ``user_pool`` candidates of the vector list whose user side is written in another language than the
    question, in their vector order: the second vote that the BM25 lists give a round in the question's language
    and can never give one in another script or language (a Russian answer to an English question shares no term
    with it), so that in fusion the answer in the other language competes on its similarity alone.

    A round's language is ``text.language_of`` of its user side, the function that gives the question's, on the rows
    the search reads anyway (the pool; the few candidates not there yet are read): the script first, then the
    Latin-language cues, no model for an English text (``other_language``). ``Message.lang`` (stored) is another detector's answer
    (py3langid on every text, ``''`` when unsure) and would be a query per search. A round without a user side
    has no language and is left out. In a scope whose candidates are all in the question's language the list is
    empty, so nothing moves; and it is left out when fewer than ``other_language_min_share`` of the candidates are
    in another language (a mostly English scope with two French rounds: ranked among themselves, those two would
    take the list's first places whatever their similarity)."""

    produces = (ListName.other_language,)
    reads = "the user side of the best user_pool dense candidates (rows in the pool)"
    small_scope_weight = True

    def generate(self, s: SearchState) -> None:
        dense = s.lists.get(ListName.vector, [])[: s.config.user_pool]  # none when the vector list is off
        if not dense:
            return
        ids = [rid for rid, _ in dense]
        s.read_rounds(ids)  # timed as the rows it reads (fetch_rows), not twice
        with stage(s.timings, "other_language"):
            lang = language_of(s.query)
            ranked = [
                (rid, score)
                for rid, score in dense
                if rid in s.pool and s.pool[rid].user_text and other_language(lang, s.pool[rid].user_text)
            ]
        if ranked and len(ranked) >= s.config.other_language_min_share * len(ids):
            s.add(ListName.other_language, ranked)


GENERATORS: tuple[Generator, ...] = (
    VectorList(),
    Bm25List(),
    TailBm25List(),
    UserSideList(),  # after the lists its first fusion reads (vector, bm25, bm25_tail)
    RecencyList(),  # ... and after the user-side list
    GraphLists(),
    InRangeList(),
    OtherLanguageList(),  # last: the first fusions of the pool lists do not read it
)
"""Every candidate generator, in the order they run."""

SMALL_SCOPE_LISTS: frozenset[ListName] = frozenset(
    name for g in GENERATORS if g.small_scope_weight for name in g.produces
)
"""Lists a small scope weighs less (``RetrievalConfig.small_store_rounds``): the lexical ones (BM25's IDF over a
handful of sessions makes any shared word look rare) and the extracted-memory ones (over a handful of facts they
rank every fact, so any round with a fact gains a bonus whether it matches or not, and a round that matches the
question exactly but has no facts yet, such as the newest turn, loses to it)."""


def weights(s: SearchState) -> Mapping[str, float]:
    """The weight of every list in this search: the configured one (``RetrievalConfig.weight``), scaled down in a
    scope of fewer than ``small_store_rounds`` rounds for ``SMALL_SCOPE_LISTS``. The scope's size is read off the
    vector list, which holds every round of a scope smaller than ``n``; so this is asked only after
    ``VectorList`` ran."""
    out = {name.value: s.config.weight(name) for name in ListName}
    vec = s.signals.get(ListName.vector)
    cfg = s.config
    if cfg.small_store_rounds and vec and len(vec) < s.n:
        out = fusion.scale_for_store_size(out, len(vec), cfg.small_store_rounds, sorted(SMALL_SCOPE_LISTS))
    return out
