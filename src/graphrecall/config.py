"""Settings: environment variables (``GRAPHRECALL_*``) with defaults, and retrieval tuning knobs.

Plain pydantic models rather than a settings framework: every value can also be passed in code, and the env is
read once, at ``Settings.from_env()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from graphrecall.errors import ConfigurationError


def default_root() -> Path:
    """``$GRAPHRECALL_ROOT``, else ``~/.graphrecall/store``."""
    env = os.environ.get("GRAPHRECALL_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".graphrecall" / "store"


class ListName(StrEnum):
    """The ranked lists a search fuses, in the order fusion reads them; each is made by one candidate generator
    (``retrieve.lists``) and is also the name of its signal on a ``Hit``."""

    vector = "vector"  # rounds by the best of their user, passage and reply similarity
    bm25 = "bm25"  # rounds by BM25 over their text (the derived ``round_terms`` index)
    bm25_tail = "bm25_tail"  # the write log's unflushed rounds by BM25 over the tail alone
    bm25_user = "bm25_user"  # the best candidates so far re-ranked by BM25 over the user's words
    recency = "recency"  # the best candidates so far, newest first (questions about now)
    fact = "fact"  # rounds holding the sources of the best facts
    event = "event"  # rounds holding the sources of the best events
    entity = "entity"  # rounds holding the facts and events of the entities the question names
    in_range = "in_range"  # rounds inside the question's time range, by similarity
    other_language = "other_language"  # dense candidates in another language, by similarity


DEFAULT_WEIGHTS: dict[str, float] = {
    ListName.vector.value: 1.0,
    ListName.bm25.value: 0.7,
    ListName.bm25_user.value: 1.0,
    ListName.fact.value: 1.0,
    ListName.event.value: 0.5,
    ListName.entity.value: 0.5,
}
"""The lists ``RetrievalConfig.weights`` names, and the weight of each when it is not named. The other lists have a
knob of their own (``OWN_KNOB``)."""
OWN_KNOB: dict[str, str] = {
    ListName.bm25_tail.value: "it weighs like bm25: the same signal over the rounds not yet in Kuzu",
    ListName.recency.value: "its weight is recency_weight",
    ListName.in_range.value: "its weight is in_range_weight",
    ListName.other_language.value: "its weight is other_language_weight",
}


class RetrievalConfig(BaseModel):
    """How candidates are generated and fused. Defaults were tuned on the LongMemEval_S dev split (docs/benchmarks.md)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt knob is an error, not a silent default

    candidates: int = Field(default=60, ge=1, description="candidates per generator")
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(
        default=30,
        ge=1,
        description="RRF damping: lower favours items that some list ranks near the top (30 beat the usual 60 "
        "on turn-level nDCG, docs/benchmarks.md)",
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="fusion weight per list (config.DEFAULT_WEIGHTS names them, with the default of each); a list "
        "left out keeps its default, 0 mutes a list (it is not computed), an unknown name is an error",
    )
    user_pool: int = Field(
        default=40,
        ge=1,
        description="how many of the best vector+BM25 candidates the user-side BM25 list re-scores (each costs "
        "a row lookup)",
    )
    user_side: Literal["always", "unless_about_others"] = Field(
        default="unless_about_others",
        description="when the user's half of a round is preferred (the user-side BM25 list `bm25_user`, and "
        "`reply_penalty` on reply similarity): always, or not for a question about someone else (no first person, "
        "and a name or a third-person pronoun: retrieve.intent.asks_about_someone_else, 'when did Melanie run a "
        "race?'), whose evidence may be in either half. Measured (docs/benchmarks.md): LongMemEval dev unchanged, "
        "LoCoMo dev evidence-turn recall@10 0.632 -> 0.704 with speaker B as the assistant, 0.594 -> 0.577 with "
        "both speakers as users",
    )
    parallel: bool = Field(
        default=True, description="run independent store queries of a search on worker threads"
    )
    use_reply_vectors: bool = True
    passage_vectors: bool = Field(
        default=True,
        description="score a user turn that has passages (longer than Settings.passage_from_chars or the model's "
        "window: embed.passages) by the best of its vector and its passages': a detail among several things a "
        "turn says is found although the turn's vector dilutes it",
    )
    passage_penalty: float = Field(
        default=0.1,
        ge=0.0,
        description="subtracted from a passage's similarity before the max: a turn with many passages has one that "
        "matches some question by chance more often than a short turn does. Chosen with passages from 300 "
        "characters (Settings.passage_from_chars), by cross-validation on LongMemEval dev (0.1 in 4 of 5 folds) "
        "and checked on LoCoMo dev and long messages (docs/benchmarks.md 'Long messages')",
    )
    reply_penalty: float = Field(
        default=0.02, description="subtracted from reply-vector similarity before the max"
    )
    query_stopwords: bool = Field(
        default=True,
        description="drop words without content (graphrecall/stopwords.txt: function words, 'now', 'again', 'remind me') "
        "from the query before BM25; False ranks as before the list existed",
    )
    small_store_rounds: int = Field(
        default=60,
        ge=0,
        description="a scope with fewer rounds than this scales the BM25 lists' weights by rounds / this value: "
        "IDF from a handful of sessions cannot tell an incidental shared word from the answer's (0: off). The "
        "scope size is read off the vector list, which holds every round of a scope smaller than `candidates`, "
        "so values above `candidates` act as `candidates` (60 = the default `candidates`: measured on the "
        "small-store dev split, docs/benchmarks.md; ~500-round LongMemEval scopes are never scaled)",
    )
    time_boost: float = Field(
        default=0.5, ge=0.0, description="added, in RRF rank-1 units, to in-range candidates"
    )
    feedback_weight: float = Field(
        default=0.0,
        ge=0.0,
        description="rounds marked useful by feedback (Memory.feedback) gain this many RRF rank-1 units, rounds "
        "marked wrong lose as many (0: off). Off by default: a simulated user on LoCoMo dev lifted the questions it "
        "had marked (R@1 0.355 -> 0.558 at 0.5) and lowered the others (0.355 -> 0.273) (docs/months.md, 'Feedback')",
    )
    in_range_weight: float = Field(
        default=0.5,
        ge=0.0,
        description="weight of a list of the rounds inside the question's time range (retrieve.timeparse), ranked by "
        "vector similarity among themselves: the best match inside the range ranks first in it although the whole "
        "scope's lists rank it below where the flat time_boost can lift it (0: off). 0.5: LongMemEval dev "
        "temporal-reasoning session recall_all@10 0.939 -> 0.970 with no metric lower, LoCoMo dev evidence recall@10 "
        "0.720 -> 0.728 (docs/benchmarks.md 'Rounds inside the question's time range')",
    )
    other_language_weight: float = Field(
        default=1.7,
        ge=0.0,
        description="weight of a list of the best `user_pool` dense candidates whose user side is written in another "
        "language than the question (retrieve.lists.other_language), ranked by vector similarity among themselves: "
        "the vote the BM25 lists give rounds in the question's language, which they cannot give a round in "
        "another script or language (0: off). Scaled down in a small scope like the BM25 lists. A scope in the "
        "question's language only has no candidate for it, so its rankings do not move. 1.7 = bm25 + bm25_user's "
        "default weights, not tuned: multilingual dev R@1 e5-small 0.735 -> 0.783 (cross-lingual 0.538 -> 0.692, "
        "same language unchanged), MiniLM 0.614 -> 0.627 (docs/benchmarks.md 'A dense list for rounds in another "
        "language')",
    )
    other_language_min_share: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="the other-language list runs only when at least this share of the candidates it reads is in "
        "another language than the question: in a scope that mostly speaks the question's language, a few foreign "
        "rounds would otherwise take its first places whatever their similarity (a LongMemEval haystack with two "
        "French and Korean prompts put both above the answer). The multilingual set's mixed histories hold 36-100%",
    )
    recency_weight: float = Field(
        default=0.0,
        ge=0.0,
        description="weight of a list of the best `recency_pool` candidates ordered newest first, used only when the "
        "question asks how things are now ('now', 'currently', 'these days', 'so far': retrieve.intent), so that an "
        "answer that changed over time is found in its latest version (0: off). Off by default: measured, weight 2 "
        "lifts small-store R@1 (dev 0.686 -> 0.765, test 0.686 -> 0.745) but costs LongMemEval dev 0.012-0.018 turn "
        "ndcg@10, and weight 1 (LongMemEval -0.003) puts a newer, merely related round above the README demo's "
        "answer to 'Where do I work now?' (docs/benchmarks.md, small stores)",
    )
    newer_restatements: Literal["off", "now", "always"] = Field(
        default="now",
        description="among the best `restatement_top` hits, put a round above an older one that it restates (user-side "
        "cosine >= `restatement_similarity`): the latest version of an answer that changed (retrieve.updates). "
        "'now' (default): only for questions about how things are now (retrieve.intent); 'always': for every "
        "question (measured: small-store R@1 falls, docs/benchmarks.md); 'off'",
    )
    restatement_similarity: float = Field(
        default=0.5,
        ge=-1.0,
        le=1.0,
        description="user-side cosine from which two rounds state the same thing, on the reference (MiniLM) scale: "
        "another embedder gets it translated (embed.profile, docs/embedders.md 'Thresholds per model'). 0.5: small-store R@1 +0.039 on "
        "both halves, LongMemEval and LoCoMo dev unchanged (0.3, best on the dev half, cost LongMemEval 0.005 turn "
        "ndcg@10; docs/benchmarks.md)",
    )
    restatement_top: int = Field(default=5, ge=2, description="how many of the best hits may be reordered so")
    restatement_contrast: float = Field(
        default=1.5,
        ge=0.0,
        description="two rounds state the same thing only if their user-side cosine also stands this many standard "
        "deviations above the mean cosine between two of the best `rerank_top` rounds of this search "
        "(retrieve.updates.above_background; 0: off): a multilingual model scores any two turns of one person's "
        "chat close together (e5-small: 0.82-0.90, above `restatement_similarity` translated to its scale), so "
        "the scope's own spread tells a restatement from a neighbour. Scale-free, so the same for every model. "
        "1.5: chosen on the multilingual set's dev half alone (e5-small R@1 0.699 off, 0.723 at 1.0-1.25, 0.735 at "
        "1.5, 0.723 at 1.75-2.0); test reported once at 1.5, not tuned on (docs/benchmarks.md 'Languages')",
    )
    recency_pool: int = Field(
        default=10,
        ge=1,
        description="how many of the best candidates (by a first fusion) the recency list orders by date",
    )
    salience_weight: float = Field(
        default=0.0,
        ge=0.0,
        description="fact hits (search kinds=fact) gain this times their salience (retrieve.salience: recency of "
        "last_seen times strength of reinforcement, in [0, 1)), in RRF rank-1 units like time_boost: a weak prior "
        "for facts said often and lately. 0 (off) by default: no dev-benchmark run has shown that a non-zero weight "
        "does not regress them (docs/months.md)",
    )
    salience_half_life_days: float = Field(
        default=90.0, gt=0.0, description="days after which a fact not seen again is half as salient"
    )
    graph_oversample: int = Field(
        default=3,
        ge=1,
        description="the fact and event lists read this many times `candidates` from each index (vector, BM25) "
        "so that as many stay once superseded and later ones are left out (retrieve.graph). Lower is faster on a "
        "large extracted scope and changes rankings: at 10,000 entities 2 and 1 took 0.2 and 0.7 ms off a 15 ms "
        "search and changed the top 10 of 17 and 31 questions in 40 (docs/benchmarks.md 'The levers left for "
        "1.2x'); 3 is kept until extracted memory with labelled answers can choose",
    )
    rerank_top: int = Field(
        default=30, ge=1, description="how many fused candidates the cross-encoder re-scores"
    )
    rerank_weight: float = Field(
        default=1.0,
        ge=0.0,
        description="how much the reranker counts against the fused order: the weight of its rank beside the "
        "fused rank, or, for a reranker whose scores are probabilities (the LLM reranker), the boost in rank-1 "
        "units that a probability of 1 adds",
    )
    question_date_slack_hours: float = Field(
        default=24.0,
        ge=0.0,
        description="items recorded up to this long after question_date stay visible (graphrecall.dates.Cutoff): "
        "question dates are often only day-precise (LongMemEval dates evidence hours after the question, on the "
        "same day)",
    )

    @field_validator("weights", mode="before")
    @classmethod
    def _every_list_weighed(cls, value: object) -> object:
        """Every list gets a weight: the ones named, the default for the rest. A name that is no list is refused,
        naming the lists that exist: a misspelt list would otherwise keep its default without a word."""
        if not isinstance(value, Mapping):
            return value  # pydantic reports the wrong type
        for name in value:
            if name in DEFAULT_WEIGHTS:
                continue
            known = ", ".join(DEFAULT_WEIGHTS)
            if name in OWN_KNOB:
                raise ValueError(
                    f"list {name!r} is not weighted in weights ({OWN_KNOB[name]}); the weighted lists are {known}"
                )
            raise ValueError(f"unknown list {name!r} in weights; the weighted lists are {known}")
        return {name: value.get(name, default) for name, default in DEFAULT_WEIGHTS.items()}

    def weight(self, name: ListName) -> float:
        """The configured weight of list ``name``, before a search adjusts it (``retrieve.lists``)."""
        if name == ListName.bm25_tail:
            return self.weights[ListName.bm25]
        if name == ListName.recency:
            return self.recency_weight
        if name == ListName.in_range:
            return self.in_range_weight
        if name == ListName.other_language:
            return self.other_language_weight
        return self.weights[name]


class ConsolidationConfig(BaseModel):
    """Knobs of ``Memory.consolidate`` (docs/months.md, "Consolidation"). Similarities are cosines on the reference
    scale, the bundled model's (all-MiniLM-L6-v2), which the defaults were read off; another embedder gets them
    translated onto its own scale where they are used (``embed.profile``, docs/embedders.md "Thresholds per
    model"), whether they are the defaults or set by the caller."""

    model_config = ConfigDict(extra="forbid")

    min_similarity: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="with an LLM: current facts of the same kind (sharing an entity, or both about none) this "
        "similar to a cluster's first fact join its cluster, and the LLM decides per cluster whether to merge. "
        "Rewordings of one fact score 0.86-0.99 with the bundled model, related but different facts 0.67-0.92 "
        "(docs/months.md has the measured pairs)",
    )
    near_exact_similarity: float = Field(
        default=0.95,
        ge=0.0,
        le=1.0,
        description="without an LLM only the same normalized text or this similarity merges (the threshold "
        "add_fact uses for a near-identical fact: ExtractionConfig.known_fact_min_similarity)",
    )
    max_cluster: int = Field(
        default=12,
        ge=2,
        description="facts shown to the LLM per cluster at most (the seed first); the rest of a larger cluster "
        "waits for the next run and counts in `deferred`",
    )
    summary_min_age_days: float = Field(
        default=30.0, ge=0.0, description="summaries=True: only windows that ended at least this long ago"
    )
    summary_window_days: int = Field(
        default=7, ge=1, description="sessions are grouped into windows this long (7: Monday-to-Sunday weeks)"
    )
    summary_max_chars: int = Field(
        default=16_000, ge=500, description="message text shown to the LLM per window at most"
    )
    max_llm_calls: int = Field(
        default=200,
        ge=0,
        description="a run asks the LLM at most this often (one call per cluster or window); what is left is "
        "reported in `deferred` for the next run",
    )


EMBEDDER_ENV = "GRAPHRECALL_EMBEDDER"
EMBEDDER_SPECS = "minilm (default), e5-small, sentence-transformers:NAME_OR_PATH, openai:MODEL, ollama:MODEL"
"""The embedder specs ``embed.spec`` understands, for help texts (kept here: the command line's parser must not
import the embedders, which bring NumPy)."""
RERANKER_ENV = "GRAPHRECALL_RERANKER"
RERANKER_HELP = (
    "the reranker for searches: a cross-encoder's name or path, api:MODEL (a rerank server at "
    "$GRAPHRECALL_RERANK_BASE_URL), tei (Text Embeddings Inference there), cohere:MODEL, jina:MODEL, or llm / llm:N "
    f"(docs/embedders.md, 'Rerankers'; default: ${RERANKER_ENV}, else none)"
)
"""The reranker specs ``retrieve.rerank.load_reranker`` understands, for ``--reranker``'s help."""


# -- the defaults of ``Settings`` that the store uses too ---------------------------------------------------------
# Defined once, here: ``Settings`` takes them as its defaults and the store's classes (``store.logs.ScopeLogs``,
# ``store.wal.flusher.Flusher``, ``store.pool.DatabasePool``, ``store.database.ScopeDatabase``) as theirs, so a test
# or a benchmark that builds those classes directly gets what a ``Memory`` gets. The reasons are in the field
# descriptions below.
POOL_SIZE = 64
BUFFER_POOL_BYTES = 256 << 20  # 64 MiB ran out at ~4k-round ingest batches (benchmarks/perf)
FLUSH_MAX_AGE_S = 20.0
RESIDENT_ROUNDS = 64
BUCKETS_PER_ORG = 4
COMPACT_FREE_FRACTION = 0.3


def default_flush_concurrency() -> int:
    """Half the cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


class Settings(BaseModel):
    root: Path = Field(default_factory=default_root)
    embedder: str | None = Field(
        default=None,
        description="which embedder a Memory builds when none is passed (graphrecall.embed.spec: minilm, "
        "e5-small, sentence-transformers:..., openai:..., ollama:...); None: GRAPHRECALL_EMBEDDER, else minilm",
    )
    reranker: str | None = None
    embed_cache: Path | None = None
    pool_size: int = Field(
        default=POOL_SIZE,
        ge=1,
        description="scope views kept open (LRU; their buckets stay open while a view uses them, and as many idle). A request for a scope that is not open opens it (~25 ms for a "
        "small scope, idle machine) and closes another: with 20 active users and 16 open, 17% of searches paid that "
        "(benchmarks/perf/pool.py). Each open scope holds ~2-5 MB for a small one, more for a large one (its vectors "
        "are in memory: ~3 KB per round)",
    )
    buffer_pool_bytes: int = Field(
        default=BUFFER_POOL_BYTES, description="Kuzu's buffer pool per open scope database"
    )
    flush_max_age_s: float = Field(
        default=FLUSH_MAX_AGE_S,
        ge=0.0,
        description="a write waits at most this long in a scope's write log before the flusher moves it into "
        "Kuzu (it is durable and searchable meanwhile); longer batches more turns per Kuzu commit, whose tantivy "
        "commit and checkpoint dominate a flush. Under the HTTP load benchmark: 0.5 s 33, 5 s 44 requests/s "
        "(before query batching); 5 s 91, 20 s 98 requests/s for users with a past (docs/benchmarks.md)",
    )
    flush_concurrency: int = Field(
        default_factory=default_flush_concurrency,
        ge=1,
        description="how many scopes' flushers write into Kuzu at once in the background (default: half the "
        "cores). A flush of a scope's batch and its checkpoint is ~0.2-0.3 s of CPU; with 20 users flushing "
        "together on 2 cores, requests waited over a second behind them (docs/benchmarks.md)",
    )
    resident_rounds: int = Field(
        default=RESIDENT_ROUNDS,
        ge=0,
        description="a scope stays in its write log, with no Kuzu database, until it has this many rounds (or "
        "is extracted, erased from, or bulk-written): Kuzu spends ~1 MB on the first row of each node table, so "
        "a one-message user took 4.3 MB in Kuzu and 24 KB in its log (384-d vectors; docs/architecture.md, "
        "'Small scopes live in their write log'); 0 turns it off",
    )
    buckets_per_org: int = Field(
        default=BUCKETS_PER_ORG,
        ge=1,
        description="how many Kuzu databases (buckets) the scopes of an organisation share, fixed when the "
        "organisation's first scope enters Kuzu (recorded in its manifest, so changing this later moves nobody). "
        "Each populated bucket costs ~8-10 MB whatever it holds (Kuzu's per-table floor) and has one writer; "
        "a user costs kilobytes inside it (docs/architecture.md, 'Storage: buckets')",
    )
    compact_free_fraction: float = Field(
        default=COMPACT_FREE_FRACTION,
        gt=0.0,
        le=1.0,
        description="maintenance rewrites a bucket into a fresh file when at least this share of it is free space "
        "(Kuzu 0.11.3 reuses little of what it frees, so a bucket grows with its operations, not its data). The "
        "share is estimated from Kuzu's own accounting and, once the bucket was compacted, from its growth since "
        "(store.freespace); a rewrite copies ~20k rows/s and holds the bucket's requests meanwhile. 0.3: a bucket "
        "holds at most ~1.4x what a rewrite would; a scope churned by imports and erasures was compacted every "
        "10-14 rounds, 0.7-1.7 s each (docs/benchmarks.md 'Compaction'). The same bound applies to the scope's "
        "derived indexes: one whose deleted or replaced rows are at least this share of its files is rewritten "
        "(index.scope)",
    )
    passage_from_chars: int = Field(
        default=300,
        ge=0,
        description="a user turn longer than this many characters is stored with a vector per passage (a sentence "
        "or two) beside its own, so one detail among several is found (embed.passages); turns longer than the "
        "model's window always are. 300: LoCoMo dev evidence recall@10 +0.011 and LongMemEval dev session "
        "ndcg@10 +0.004, for 1.6x the user side's embedding time at ingest (200: 2.0x; the window, ~760: only "
        "long messages; docs/benchmarks.md 'Long messages')",
    )
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env = os.environ
        values: dict[str, object] = {"root": default_root()}
        if env.get(EMBEDDER_ENV, "").strip():
            values["embedder"] = env[EMBEDDER_ENV].strip()
        if env.get(RERANKER_ENV, "").strip():
            values["reranker"] = env[RERANKER_ENV].strip()
        if env.get("GRAPHRECALL_EMBED_CACHE"):
            values["embed_cache"] = Path(env["GRAPHRECALL_EMBED_CACHE"]).expanduser()
        numbers = (
            ("GRAPHRECALL_POOL_SIZE", "pool_size", int),
            ("GRAPHRECALL_FLUSH_MAX_AGE_S", "flush_max_age_s", float),
            ("GRAPHRECALL_RESIDENT_ROUNDS", "resident_rounds", int),
            ("GRAPHRECALL_BUCKETS_PER_ORG", "buckets_per_org", int),
            ("GRAPHRECALL_FLUSH_CONCURRENCY", "flush_concurrency", int),
            ("GRAPHRECALL_PASSAGE_FROM_CHARS", "passage_from_chars", int),
            ("GRAPHRECALL_COMPACT_FREE_FRACTION", "compact_free_fraction", float),
        )
        for var, field, kind in numbers:
            if env.get(var):
                try:
                    values[field] = kind(env[var])
                except ValueError:
                    raise ConfigurationError(
                        f"{env[var]!r} is not a {'whole ' if kind is int else ''}number", where=var
                    ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            err = e.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            var = next((v for v, f, _ in numbers if f == field and env.get(v)), field)
            raise ConfigurationError(f"{err['msg']} (got {err.get('input')!r})", where=var) from None
