"""Two ways to keep many users in one Kuzu database (a *bucket*), measured side by side with Kuzu alone.

Both give every row a primary key unique in the bucket (``key`` = the user's short prefix + the row's id) and keep the
row's own ``id`` beside it. They differ in how a user's rows are found without a key:

- ``column``: a ``scope`` column in every node table; a user's rows are ``WHERE n.scope = $s`` (a scan of the
  table, every user's rows);
- ``anchor``: an ``OWNS`` edge from the user's ``Scope`` node to each of its rows; a user's rows are
  ``MATCH (:Scope {key: $s})-[:OWNS]->(n)`` (the user's adjacency list).

What is timed, per user, in buckets of growing size (the user measured is one in the middle): loading its session and
message ids (what ``store.known`` does on a first write), 30 rounds read by key, its rounds in a date range, a chat
turn written with ``CREATE`` (2 messages, a round, their edges), and erasing every row of the user. Disk is the
bucket's file after a checkpoint.

    python -m benchmarks.perf.bucket_layout --users 100,1000,4000 --rounds 20 --out benchmarks/results/bucket_layout
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import kuzu
import numpy as np
import pyarrow as pa

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run

DIM = 384
TS = pa.timestamp("us")
BASE = datetime(2024, 1, 1)
CHUNK_USERS = 500


def schema(variant: str) -> list[str]:
    col = ", scope STRING" if variant == "column" else ""
    stmts = [
        "CREATE NODE TABLE Scope(key STRING PRIMARY KEY, n INT64)",
        f"CREATE NODE TABLE Session(key STRING PRIMARY KEY, id STRING, started_at TIMESTAMP{col})",
        f"CREATE NODE TABLE Message(key STRING PRIMARY KEY, id STRING, session_id STRING, idx INT64, text STRING,"
        f" at TIMESTAMP{col})",
        f"CREATE NODE TABLE Round(key STRING PRIMARY KEY, id STRING, session_id STRING, text STRING, at TIMESTAMP,"
        f" embedding FLOAT[{DIM}]{col})",
        "CREATE REL TABLE MSG_IN(FROM Message TO Session)",
        "CREATE REL TABLE ROUND_IN(FROM Round TO Session)",
        "CREATE REL TABLE HAS_MESSAGE(FROM Round TO Message)",
    ]
    if variant == "anchor":
        stmts.append(
            "CREATE REL TABLE OWNS(FROM Scope TO Session, FROM Scope TO Message, FROM Scope TO Round)"
        )
    return stmts


def user_rows(u: int, rounds: int, rng: np.random.Generator) -> dict[str, pa.Table]:
    """One user's rows: a session per 4 rounds, two messages per round."""
    p = f"{u:x}:"
    sessions = [f"s{i}" for i in range((rounds + 3) // 4)]
    sess = {
        "key": [p + s for s in sessions],
        "id": sessions,
        "started_at": pa.array([BASE + timedelta(days=i) for i in range(len(sessions))], TS),
    }
    msg_ids = [f"s{r // 4}#{2 * (r % 4) + k}" for r in range(rounds) for k in (0, 1)]
    msgs = {
        "key": [p + m for m in msg_ids],
        "id": msg_ids,
        "session_id": [m.split("#")[0] for m in msg_ids],
        "idx": pa.array([int(m.split("#")[1]) for m in msg_ids], pa.int64()),
        "text": [f"user {u} message {m}: walked the dog past the bakery" for m in msg_ids],
        "at": pa.array([BASE + timedelta(days=i // 8, minutes=i) for i in range(len(msg_ids))], TS),
    }
    round_ids = [f"s{r // 4}@{r % 4}" for r in range(rounds)]
    vecs = rng.standard_normal((rounds, DIM)).astype(np.float32)
    rnds = {
        "key": [p + r for r in round_ids],
        "id": round_ids,
        "session_id": [r.split("@")[0] for r in round_ids],
        "text": [f"user {u} round {r}: walked the dog past the bakery, bought rye" for r in round_ids],
        "at": pa.array([BASE + timedelta(days=i // 4, minutes=i) for i in range(rounds)], TS),
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), DIM),
    }
    return {"Session": pa.table(sess), "Message": pa.table(msgs), "Round": pa.table(rnds)}


def build(path: Path, variant: str, users: int, rounds: int) -> kuzu.Database:
    """The bucket, bulk-loaded with COPY (every user's rows in one COPY per table)."""
    db = kuzu.Database(str(path), buffer_pool_size=256 << 20, max_db_size=1 << 36)
    conn = kuzu.Connection(db)
    for stmt in schema(variant):
        conn.execute(stmt)
    rng = np.random.default_rng(7)
    frame = pa.table({"key": [f"{u:x}" for u in range(users)], "n": pa.array(range(users), pa.int64())})  # noqa: F841  (read by COPY)
    conn.execute("COPY Scope FROM frame")
    for start in range(0, users, CHUNK_USERS):  # a COPY of 160k rounds fills a 256 MiB buffer pool
        _load(
            conn, variant, [user_rows(u, rounds, rng) for u in range(start, min(users, start + CHUNK_USERS))]
        )
    conn.execute("CHECKPOINT")
    conn.close()
    return db


def _load(conn: kuzu.Connection, variant: str, parts: list[dict[str, pa.Table]]) -> None:
    """Some users' rows and edges, one COPY per table."""
    tables = {t: pa.concat_tables([p[t] for p in parts]) for t in ("Session", "Message", "Round")}
    if variant == "column":
        for t, data in tables.items():
            scope = [k.split(":")[0] for k in data.column("key").to_pylist()]
            tables[t] = data.append_column("scope", pa.array(scope))
    for t, data in tables.items():
        frame = data
        conn.execute(f"COPY {t} FROM frame")

    def edges(src: list[str], dst: list[str]) -> pa.Table:
        return pa.table({"from": src, "to": dst})

    def owner(keys: list[str], ids: list[str]) -> list[str]:
        return [k.split(":")[0] + ":" + i for k, i in zip(keys, ids, strict=True)]

    m, r = tables["Message"], tables["Round"]
    mk, rk = m.column("key").to_pylist(), r.column("key").to_pylist()
    frame = edges(mk, owner(mk, m.column("session_id").to_pylist()))
    conn.execute("COPY MSG_IN FROM frame")
    frame = edges(rk, owner(rk, r.column("session_id").to_pylist()))
    conn.execute("COPY ROUND_IN FROM frame")
    frame = edges(
        [k for k in rk for _ in (0, 1)],
        [f"{k.split('@')[0]}#{2 * int(k.split('@')[1]) + j}" for k in rk for j in (0, 1)],
    )
    conn.execute("COPY HAS_MESSAGE FROM frame")
    if variant == "anchor":
        for t in ("Session", "Message", "Round"):
            keys = tables[t].column("key").to_pylist()
            frame = edges([k.split(":")[0] for k in keys], keys)  # noqa: F841
            conn.execute(f"COPY OWNS FROM frame (from='Scope', to='{t}')")


def _rows(conn: kuzu.Connection, q: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    res = conn.execute(q, params or {})
    assert not isinstance(res, list)
    out: list[list[Any]] = []
    while res.has_next():
        out.append(list(res.get_next()))
    res.close()
    return out


def scoped(variant: str, label: str, alias: str) -> str:
    """The pattern that finds a user's rows of ``label`` (parameter ``$s``: the user's prefix, without ':')."""
    if variant == "column":
        return f"MATCH ({alias}:{label}) WHERE {alias}.scope = $s"
    return f"MATCH (:Scope {{key: $s}})-[:OWNS]->({alias}:{label}) WHERE true"


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(db: kuzu.Database, variant: str, users: int, rounds: int, repeat: int) -> dict[str, float]:
    conn = kuzu.Connection(db)
    u = users // 2
    s = f"{u:x}"

    def known() -> None:
        ids = _rows(conn, f"{scoped(variant, 'Session', 'n')} RETURN n.id")
        ids += _rows(conn, f"{scoped(variant, 'Message', 'n')} RETURN n.id")
        assert len(ids) == (rounds + 3) // 4 + 2 * rounds, len(ids)

    stmt = conn.prepare("MATCH (r:Round {key: $k}) RETURN r.id, r.text, r.at")

    def by_key() -> None:
        for i in range(min(30, rounds)):
            res = conn.execute(stmt, {"k": f"{s}:s{i // 4}@{i % 4}"})
            assert not isinstance(res, list)
            assert res.has_next()
            res.close()

    def in_range() -> None:
        _rows(
            conn,
            f"{scoped(variant, 'Round', 'r')} AND r.at >= $a AND r.at <= $b RETURN r.id ORDER BY r.at LIMIT 50",
            {"s": s, "a": BASE, "b": BASE + timedelta(days=2)},
        )

    out = {
        "known_ids_ms": timed(
            lambda: _rows(conn, f"{scoped(variant, 'Message', 'n')} RETURN n.id", {"s": s}), repeat
        ),
        "read_30_by_key_ms": timed(by_key, repeat),
        "rounds_in_range_ms": timed(in_range, repeat),
    }
    del known
    turn = [0]

    def write_turn() -> None:
        turn[0] += 1
        t = turn[0]
        sid = "s0"
        m = [{"key": f"{s}:x{t}#{k}", "id": f"x{t}#{k}", "session_id": sid, "idx": 100 + k, "text": "hi", "at": BASE}
             for k in (0, 1)]  # fmt: skip
        conn.execute("BEGIN TRANSACTION")
        if variant == "column":
            conn.execute(
                "UNWIND $rows AS r CREATE (:Message {key: r.key, id: r.id, session_id: r.session_id, idx: r.idx,"
                " text: r.text, at: r.at, scope: $s})",
                {"rows": m, "s": s},
            )
            conn.execute(
                "CREATE (:Round {key: $k, id: $i, session_id: $sid, text: 'hi', at: $at, scope: $s})",
                {"k": f"{s}:x{t}@0", "i": f"x{t}@0", "sid": sid, "at": BASE, "s": s},
            )
        else:
            conn.execute(
                "MATCH (sc:Scope {key: $s}) UNWIND $rows AS r CREATE (sc)-[:OWNS]->(:Message {key: r.key, id: r.id,"
                " session_id: r.session_id, idx: r.idx, text: r.text, at: r.at})",
                {"rows": m, "s": s},
            )
            conn.execute(
                "MATCH (sc:Scope {key: $s}) CREATE (sc)-[:OWNS]->(:Round {key: $k, id: $i, session_id: $sid,"
                " text: 'hi', at: $at})",
                {"k": f"{s}:x{t}@0", "i": f"x{t}@0", "sid": sid, "at": BASE, "s": s},
            )
        for mk in (f"{s}:x{t}#0", f"{s}:x{t}#1"):
            conn.execute(
                "MATCH (a:Message {key: $f}), (b:Session {key: $t}) CREATE (a)-[:MSG_IN]->(b)",
                {"f": mk, "t": f"{s}:{sid}"},
            )
            conn.execute(
                "MATCH (a:Round {key: $f}), (b:Message {key: $t}) CREATE (a)-[:HAS_MESSAGE]->(b)",
                {"f": f"{s}:x{t}@0", "t": mk},
            )
        conn.execute(
            "MATCH (a:Round {key: $f}), (b:Session {key: $t}) CREATE (a)-[:ROUND_IN]->(b)",
            {"f": f"{s}:x{t}@0", "t": f"{s}:{sid}"},
        )
        conn.execute("COMMIT")

    out["write_turn_ms"] = timed(write_turn, repeat)

    def erase(victim: int) -> None:
        v = f"{victim:x}"
        conn.execute("BEGIN TRANSACTION")
        for label in ("Round", "Message", "Session"):
            if variant == "column":
                _rows(conn, f"MATCH (n:{label}) WHERE n.scope = $s DETACH DELETE n", {"s": v})
            else:
                _rows(conn, f"MATCH (:Scope {{key: $s}})-[:OWNS]->(n:{label}) DETACH DELETE n", {"s": v})
        conn.execute("COMMIT")

    victims = iter(range(repeat))
    out["erase_user_ms"] = timed(lambda: erase(next(victims)), repeat)
    conn.execute("CHECKPOINT")
    conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", default="100,1000,4000", help="bucket sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=20, help="rounds per user")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    run = Run.begin()
    results: list[dict[str, Any]] = []
    for users in (int(x) for x in args.users.split(",")):
        for variant in ("column", "anchor"):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "bucket.kuzu"
                t0 = time.perf_counter()
                db = build(path, variant, users, args.rounds)
                built = time.perf_counter() - t0
                disk = path.stat().st_size
                row = {"users": users, "variant": variant, "build_s": round(built, 1), "disk_bytes": disk,
                       "disk_per_user_bytes": disk // users,
                       **{k: round(v, 2) for k, v in measure(db, variant, users, args.rounds, args.repeat).items()}}  # fmt: skip
                db.close()
                print(row, flush=True)
                results.append(row)
    if args.out is not None:
        lines = [
            "| users | variant | disk/user KB | known ids ms | 30 by key ms | in range ms | turn ms | erase ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['users']} | {r['variant']} | {r['disk_per_user_bytes'] / 1024:.1f} | {r['known_ids_ms']} | "
            f"{r['read_30_by_key_ms']} | {r['rounds_in_range_ms']} | {r['write_turn_ms']} | {r['erase_user_ms']} |"
            for r in results
        ]
        result = {"args": vars(args) | {"out": str(args.out)}, "results": results}
        save_report(args.out, "bucket_layout", result, "\n".join(lines), run)


if __name__ == "__main__":
    main()
