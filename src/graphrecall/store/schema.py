"""The graph schema of one scope's database, and its creation.

One Kuzu database holds one scope (an org's user). ``SCHEMA_VERSION`` is stored in the ``Meta`` node together with
the embedder id and dimension; opening a database with another embedder is refused (vectors of different models are
not comparable, and mixing them would return silent garbage).

Indexes: none inside Kuzu since schema 2. The lexical (BM25 over the ``terms`` columns: see ``graphrecall.text``
for why the terms are ours) and vector indexes that retrieval searches are derived, beside the database
(``graphrecall.store.derived``), because Kuzu's own cost a fixed ~6 MB per store for full-text search, a
checkpointed index update per write, and 37-54 ms per full-text query at 100k rounds (docs/benchmarks.md). Schema 1
stores are upgraded on open (``ScopeDatabase``): their full-text indexes are dropped, their HNSW indexes stay
(``DROP_VECTOR_INDEX`` followed by an insert crashes Kuzu 0.11.3 after a reopen) but are no longer searched.
``kuzu_index_statements`` keeps schema 1's definitions for the benchmarks that measure Kuzu's engines.

Schema 3 adds ``Fact.reinforcement``: how many times the fact was observed (said again in a session, added again by
the application, merged by consolidation), next to ``last_seen``; both feed ``retrieve.salience``. A schema 2 store
gets the column on open (``ALTER TABLE ... ADD`` with a default, then the count of each fact's source sessions).

Schema 4 adds ``Passage``: the vector of each passage of a long user turn (``embed.passages``), linked to its round
by ``PASSAGE_OF`` and deleted with it. Only rounds longer than the model's window have passages. A schema 3 store
gets the (empty) tables on open; its long rounds keep their pooled vector only until they are written again.

Schema 5 adds ``Message.lang``: the language of each message (ISO 639-1, ``''`` when too short to tell), detected
once when it is written (``text.message_language``). A schema 4 store gets the column on open (``ALTER TABLE ...
ADD`` with ``''``, then every message's language detected from its text: ~0.6 s per 1,000 messages after the
model's ~1.3 s load, docs/architecture.md). Rounds have no language column: a round's user side is its user message
(``message_ids``), whose language is stored, and nothing reads a round's language to rank it (its ``terms`` are
analysed per script and per text as before, ``text.tokenize``).

Schema 6 is a bucket's (many scopes per database: ``store.database``, docs/architecture.md "Storage: buckets"), and
it keeps fewer bytes per round (docs/benchmarks.md "Bytes per round in a bucket"): the vectors of rounds and passages
in half precision (``INT16[dim]`` of binary16 bits, ``store.vectors``), a round's text and user text only in its
messages (``INDEX_ONLY``), and no ``HAS_MESSAGE`` edge (``LEGACY_REL_TABLES``: a round's messages are those of its
session that its ``message_ids`` name). A database per scope keeps the schema 5 layout (``legacy=True``), which
``store.move`` converts when it moves one into its bucket.

Schema 7 keeps each scope's derived-index marks in integer columns of its ``Scope`` row (``MARK_COLUMNS``) instead
of one JSON string; a schema 6 bucket is upgraded on open (``BucketDatabase._upgrade``).
"""

from __future__ import annotations

SCHEMA_VERSION = 7
UPGRADABLE_FROM = 6
"""The bucket schema that opening upgrades in place (``BucketDatabase._upgrade``): 6 -> 7 keeps each scope's index
marks in integer columns (``MARK_COLUMNS``) instead of one JSON string."""
LEGACY_SCHEMA_VERSION = 5
"""The last schema of a database per scope (``store.legacy``): stores written before buckets are moved into their
bucket on open."""

# Kuzu-native indexes of schema 1 (benchmarks measure them; upgraded stores may still hold them).
# (table, index name, column) for every HNSW index.
VECTOR_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("Round", "round_user_vec", "embedding"),
    ("Round", "round_reply_vec", "reply_embedding"),
    ("Fact", "fact_vec", "embedding"),
    ("Event", "event_vec", "embedding"),
    ("Entity", "entity_vec", "embedding"),
)

# (table, index name, column) for every FTS index.
FTS_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("Round", "round_fts", "terms"),
    ("Fact", "fact_fts", "terms"),
    ("Event", "event_fts", "terms"),
)

MARK_COLUMNS: dict[str, str] = {
    "Round": "mark_round",
    "Passage": "mark_passage",
    "Fact": "mark_fact",
    "Event": "mark_event",
}
"""The ``Scope`` column that holds a scope's derived-index mark of each indexed table (``store.derived``). Integers,
not one JSON string (schema 6's ``index_marks``): under the store's writes, Kuzu 0.11.3 kept about one more string
value per scope of the bucket at every write, so the column grew with the square of a bucket's scopes (10 -> 80
users of 10 ``add_fact`` calls: 510 -> 31,746 stored values; 8 MB at 200 users); an integer is updated in place
(docs/benchmarks.md, "Index marks as integers"). Last in the table, so that a bucket upgraded by
``ALTER TABLE ... ADD`` has the columns of a new one in the same order."""

SCOPE_TABLE = (
    "CREATE NODE TABLE Scope(key STRING PRIMARY KEY, prefix STRING, created_at TIMESTAMP,"
    " schema_version INT64, embedder_id STRING, dim INT64, next_prefix INT64, "
    + ", ".join(f"{c} INT64" for c in MARK_COLUMNS.values())
    + ")"
)
"""One row per scope of the bucket (``key``: the user id; ``prefix``: what its rows' keys start with; its derived
indexes' marks, ``MARK_COLUMNS``), and the bucket's own row, ``BUCKET_ROW`` (schema version, embedder, dimension,
the next prefix to hand out). Why no ``Meta`` table: every populated node table costs ~1 MB (its primary-key index),
so the bucket's description shares the scopes' table."""
BUCKET_ROW = ".bucket"  # a user id never starts with a dot (``models.validate_identifier``)

DEAD_COLUMNS: dict[str, tuple[str, ...]] = {"Scope": ("index_marks",)}
"""Columns an upgraded bucket still has and nothing reads or writes: schema 6's marks. Not dropped on upgrade (Kuzu
0.11.3 crashed at every later checkpoint of a ``SET`` on the table once it had replayed a ``DROP`` from its WAL after
a kill); a compaction's rewrite, which copies ``scope_columns()`` into a new bucket, leaves them behind."""


def scope_columns() -> list[str]:
    """The ``Scope`` table's columns, ``key`` first, in their order."""
    return [c.strip().split(" ")[0] for c in SCOPE_TABLE.split("(", 1)[1].rstrip(")").split(",")]


def _columns(dim: int, *, legacy: bool = False) -> dict[str, str]:
    """Each scope table's columns after its primary key. ``legacy``: as in a database per scope (schema 5,
    ``legacy_node_tables``, less ``NEW_IN_BUCKETS``), where every vector is ``FLOAT[dim]`` and a round keeps its
    text and user text; a bucket keeps the vectors of rounds and passages in half precision (``store.vectors``) and
    a round's texts only in its messages (``store.rounds``)."""
    vec = f"FLOAT[{dim}]"
    half = vec if legacy else f"INT16[{dim}]"
    texts = (
        "text STRING, user_text STRING, " if legacy else ""
    )  # a bucket's round has its text in its messages
    return {
        "Session": "id STRING, started_at TIMESTAMP, extract_status STRING, extract_error STRING, updated_at TIMESTAMP",
        "Message": "id STRING, session_id STRING, idx INT64, role STRING, text STRING, at TIMESTAMP, lang STRING",
        "Round": f"id STRING, session_id STRING, idx INT64, {texts}terms STRING, at TIMESTAMP,"
        f" message_ids STRING[], embedding {half}, reply_embedding {half}, feedback INT64",
        "Fact": "id STRING, text STRING, terms STRING, kind STRING, polarity STRING, confidence DOUBLE,"
        " valid_from TIMESTAMP, valid_to TIMESTAMP, recorded_at TIMESTAMP, expired_at TIMESTAMP,"
        f" last_seen TIMESTAMP, session_id STRING, message_ids STRING[], embedding {vec}, reinforcement INT64,"
        " fact_key STRING, disputed_at TIMESTAMP, dispute_note STRING",
        "Event": "id STRING, subject STRING, verb STRING, object STRING, text STRING, terms STRING,"
        f" time_start TIMESTAMP, time_end TIMESTAMP, session_id STRING, message_ids STRING[], embedding {vec},"
        " feedback INT64",
        "Entity": f"id STRING, name STRING, norm STRING, type STRING, aliases STRING[], embedding {vec}",
        "Passage": f"id STRING, round_id STRING, idx INT64, embedding {half}",
    }


NEW_IN_BUCKETS: dict[str, tuple[str, ...]] = {
    "Round": ("feedback",),
    "Fact": ("fact_key", "disputed_at", "dispute_note"),
    "Event": ("feedback",),
}
"""Columns a database per scope (schema 5, ``legacy_node_tables``) did not have: a move from one reads them as NULL
(``store.move``, with ``NEW_COLUMN_TYPES``). ``Fact.fact_key``: the application's key of a fact added with one
(``add_fact(key=...)``); ``disputed_at``/``dispute_note`` and ``feedback`` (a round's or an event's net count of
useful minus wrong): what ``Memory.feedback`` records (``store.feedback``)."""
NEW_COLUMN_TYPES = {
    "fact_key": "STRING",
    "dispute_note": "STRING",
    "disputed_at": "TIMESTAMP",
    "feedback": "INT64",
}


INDEX_ONLY: dict[str, tuple[str, ...]] = {"Round": ("text", "user_text")}
"""Columns a writer passes with a table's rows that Kuzu does not keep and the derived indexes do: a round's text
and user text (the stored documents of ``round_terms``, read by every search) are its messages', joined
(``rows.round_texts``), so Kuzu keeps them once, in ``Message.text``."""

HALF_VECTORS: frozenset[tuple[str, str]] = frozenset(
    (table, col.split()[0])
    for table, cols in _columns(1).items()
    for col in cols.split(",")
    if "INT16[" in col
)
"""(table, column) of every vector a bucket stores in half precision (``store.vectors``)."""


def column_names(table: str, *, legacy: bool = False) -> list[str]:
    """A scope table's columns after ``key`` (``id`` first), in their order; ``legacy``: in a database per scope
    (schema 5: ``NEW_IN_BUCKETS`` left out)."""
    names = [c.strip().split(" ")[0] for c in _columns(1, legacy=legacy)[table].split(",")]
    return [n for n in names if n not in NEW_IN_BUCKETS.get(table, ())] if legacy else names


SCOPE_TABLES: tuple[str, ...] = ("Session", "Message", "Round", "Passage", "Fact", "Event", "Entity")
"""The node tables whose rows belong to one scope: keyed by ``key`` (the scope's prefix + the row's ``id``), each row
reachable from its scope's ``Scope`` node (``owned``; ``store.database``: the scope invariant)."""


def node_tables(dim: int) -> list[str]:
    """A bucket's node tables (schema 6)."""
    return [SCOPE_TABLE] + [
        f"CREATE NODE TABLE {t}(key STRING PRIMARY KEY, {cols})" for t, cols in _columns(dim).items()
    ]


def bucket_tables(dim: int) -> list[str]:
    """Every statement that creates a bucket's tables (DDL runs in auto-commit mode: Kuzu allows none in a manual
    transaction)."""
    return [*node_tables(dim), *REL_TABLES, OWNS_REL]


def legacy_node_tables(dim: int) -> list[str]:
    """A database per scope (schema 5, ``store.legacy``): the same tables keyed by ``id``, and ``Meta``."""
    return [
        "CREATE NODE TABLE Meta(key STRING PRIMARY KEY, schema_version INT64, embedder_id STRING, dim INT64,"
        " created_at TIMESTAMP, index_marks STRING)"
    ] + [
        f"CREATE NODE TABLE {t}({_without(cols, NEW_IN_BUCKETS.get(t, ())).replace('id STRING', 'id STRING PRIMARY KEY', 1)})"
        for t, cols in _columns(dim, legacy=True).items()
    ]


def _without(columns: str, names: tuple[str, ...]) -> str:
    return ",".join(c for c in columns.split(",") if c.strip().split(" ")[0] not in names)


PASSAGE_TABLE = "CREATE NODE TABLE Passage(id STRING PRIMARY KEY, round_id STRING, idx INT64, embedding {vec})"  # schema 3 -> 4 of a database per scope (``store.legacy``)
PASSAGE_REL = "CREATE REL TABLE PASSAGE_OF(FROM Passage TO Round)"


ANCHORED: tuple[str, ...] = ("Session", "Fact", "Event", "Entity")
"""The scope tables whose rows hang from the ``Scope`` node by an ``OWNS`` edge. A message or a round is reached
through its session (``MSG_IN``, ``ROUND_IN``) and a passage through its round (``PASSAGE_OF``), edges every such row
is written with: why not an ``OWNS`` edge to them too: Kuzu 0.11.3 spends ~9 MB on each populated relationship table
once it has been checkpointed a few times (both directions; measured with Kuzu alone), whatever it holds, and every
pair of a relationship group is a table of its own, so three more pairs cost ~27 MB per bucket, and three more edges
per chat turn."""

MATCH_SCOPE = "MATCH (sc:Scope {key: $scope}) "
"""The clause every statement that reads a scope's rows without a key starts with: it binds ``sc``, the scope's
``Scope`` node, which ``owned`` patterns start from. Why a clause of its own: written inline, ``(:Scope {key:
$scope})-[:OWNS]->(f:Fact) WHERE f.id IN $ids`` let Kuzu 0.11.3 plan a scan of the whole ``Fact`` table (every
user's) and join the scope in afterwards; bound first, the scope's ``OWNS`` edges restrict the scan (Kuzu's semi
mask) to its own rows (``EXPLAIN``, measured in a bucket of many users: docs/architecture.md). A pattern without
it fails to bind ``sc``: it cannot silently read every scope."""

_REACH = {
    "Message": "(sc)-[:OWNS]->(:Session)<-[:MSG_IN]-({a}:Message)",
    "Round": "(sc)-[:OWNS]->(:Session)<-[:ROUND_IN]-({a}:Round)",
    "Passage": "(sc)-[:OWNS]->(:Session)<-[:ROUND_IN]-(:Round)<-[:PASSAGE_OF]-({a}:Passage)",
}


OWNS_REL = "CREATE REL TABLE OWNS(" + ", ".join(f"FROM Scope TO {t}" for t in ANCHORED) + ")"


def owned(alias: str, table: str) -> str:
    """The pattern that reaches the calling scope's rows of ``table`` (bound to ``alias``), after ``MATCH_SCOPE``: from its
    ``Scope`` node ``sc`` through ``OWNS`` (``ANCHORED`` tables), then for messages, rounds and passages along the edges that tie them to
    their session. Kuzu starts from the ``Scope`` node (a primary-key lookup) and reads adjacency lists, so the cost
    grows with the scope's rows, not the bucket's (``benchmarks/perf/bucket_layout.py``)."""
    if table in _REACH:
        return _REACH[table].format(a=alias)
    if table not in ANCHORED:
        raise ValueError(f"not a scope table: {table}")
    return f"(sc)-[:OWNS]->({alias}:{table})"


def passage_id(round_id: str, idx: int) -> str:
    """The id of passage ``idx`` of a round (``round_of_passage`` reads it back)."""
    return f"{round_id}#p{idx}"


def round_of_passage(passage_id: str) -> str:
    return passage_id.rpartition("#p")[0]


REL_TABLES: list[str] = [
    "CREATE REL TABLE MSG_IN(FROM Message TO Session)",
    "CREATE REL TABLE ROUND_IN(FROM Round TO Session)",
    "CREATE REL TABLE FACT_FROM(FROM Fact TO Message)",
    "CREATE REL TABLE ABOUT(FROM Fact TO Entity)",
    "CREATE REL TABLE SUPERSEDES(FROM Fact TO Fact, at TIMESTAMP, reason STRING)",
    "CREATE REL TABLE EVENT_FROM(FROM Event TO Message)",
    "CREATE REL TABLE SUBJECT(FROM Event TO Entity)",
    "CREATE REL TABLE OBJECT(FROM Event TO Entity)",
    "CREATE REL TABLE RELATED(FROM Entity TO Entity, predicate STRING, fact_id STRING)",
    PASSAGE_REL,
]
"""The edges between a scope's rows in a bucket, besides ``OWNS``. A database per scope also had ``HAS_MESSAGE``
(``LEGACY_REL_TABLES``)."""

HAS_MESSAGE_REL = "CREATE REL TABLE HAS_MESSAGE(FROM Round TO Message)"
LEGACY_REL_TABLES: list[str] = [*REL_TABLES, HAS_MESSAGE_REL]
"""A database per scope's edges (schema 5, ``store.legacy``): a round had an edge to each of its messages. A bucket
has none: the round's ``message_ids`` name them, and its session's ``MSG_IN`` edges reach them (``round_messages``),
so the table, its ~4 MB of edge headers per bucket and two edge statements per chat turn are gone."""


def round_messages(alias: str, messages: str) -> str:
    """The pattern (after ``alias`` is bound to a round) that binds ``messages`` to the messages of its session; the
    round's own are those whose id is in its ``message_ids`` (a filter the caller applies, in Cypher with
    ``list_contains`` or in Python)."""
    return f"({alias})-[:ROUND_IN]->(:Session)<-[:MSG_IN]-({messages}:Message)"


# HNSW lower-layer degree of schema 1. Kuzu's default (60) made inserting a round's two vectors ~3.8 ms; 32 halved
# that at no measurable loss in recall (docs/benchmarks.md).
HNSW_MAX_DEGREE = 32
# Candidates kept while searching (Kuzu's default is 200). With the lower degree above, 300 restores recall@60 at
# 100k rounds from 0.979 to 0.994 (exact scan as reference) at no measurable latency cost.
HNSW_SEARCH_EF = 300


def kuzu_index_statements() -> list[str]:
    """Schema 1's Kuzu-native HNSW and FTS indexes: for benchmarks that compare engines, not for stores."""
    stmts = [
        f"CALL CREATE_VECTOR_INDEX('{t}', '{name}', '{col}', metric := 'cosine', ml := {HNSW_MAX_DEGREE})"
        for t, name, col in VECTOR_INDEXES
    ]
    stmts += [fts_index_statement(t, name, col) for t, name, col in FTS_INDEXES]
    return stmts


def fts_index_statement(table: str, name: str, column: str) -> str:
    return f"CALL CREATE_FTS_INDEX('{table}', '{name}', ['{column}'], stemmer := 'none')"


def rel_ends(table: str) -> tuple[str, str] | None:
    """(FROM, TO) node tables of relationship table ``table``; None for a node table."""
    for stmt in REL_TABLES:
        name, rest = stmt.removeprefix("CREATE REL TABLE ").split("(", 1)
        if name == table:
            src, dst = rest.removeprefix("FROM ").split(",")[0].rstrip(")").split(" TO ")
            return src.strip(), dst.strip()
    return None


def rel_props(table: str) -> list[str]:
    """The property columns of relationship table ``table``, in order (``SUPERSEDES``: at, reason)."""
    for stmt in REL_TABLES:
        name, rest = stmt.removeprefix("CREATE REL TABLE ").split("(", 1)
        if name == table:
            return [part.strip().split(" ")[0] for part in rest.rstrip(")").split(",")[1:]]
    raise ValueError(f"not a relationship table: {table}")


def rel_names() -> list[str]:
    """Every relationship table between a scope's rows."""
    return [stmt.removeprefix("CREATE REL TABLE ").split("(", 1)[0] for stmt in REL_TABLES]


def edge_tables() -> list[tuple[str, str, str]]:
    """(relationship table, from, to) for every pair of a bucket's relationship tables: those between a scope's rows,
    then ``OWNS`` once per anchored table."""
    out = []
    for rel in rel_names():
        src, dst = rel_ends(rel) or ("", "")
        out.append((rel, src, dst))
    return out + [("OWNS", "Scope", t) for t in ANCHORED]
