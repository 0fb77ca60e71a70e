"""Index layer, measured: Kuzu FTS vs tantivy vs bm25s, Kuzu HNSW vs exact numpy vs usearch, on the same rounds.

``python -m benchmarks.perf.indexes --sizes 1000,10000,100000 --out benchmarks/results/indexes [--reuse]``

Rows are built the way the product builds them: LongMemEval_S haystack sessions through ``ingest`` (rounds, our
``terms``), a base of real rounds embedded once by the real MiniLM embedder (cached to ``--out/base_vectors.npy``)
and replicated by ``synth.StoreGrower`` (new ids, shifted dates, perturbed re-normalized vectors) up to the largest
size; each size is the prefix of that one stream, so every engine indexes exactly the same rows. The Kuzu store of a
size has the product schema, rows written through ``store.rounds.write_batch`` and the product's indexes built
once over them (size after each index is recorded: that is the index's footprint), and is queried through a real
``ScopeDatabase`` with ``kuzu_native.kuzu_fts_search`` / ``kuzu_vector_search`` (the queries schema 1's retriever ran). Queries are
real LongMemEval questions; lexical engines all get ``graphrecall.text.query_terms`` (our tokens, stopwords, stems), vector
engines the question's MiniLM vector (query embedding is NOT in the latencies here; the product adds ~5 ms).

Phases per size: build (timed), footprint, query latency (k = 60, the retriever's candidates per generator, warm),
quality (vector recall@10/@60 vs exact; lexical top-10 overlap with Kuzu FTS), small writes (30 single-round
durable writes on a copy: p50, and disk growth vs the same 30 in one batch). Once: natural-language safety of the
lexical engines, the footprint floor at 1 and 100 rounds, and kill -9 in the middle of writes for the derived
engines (``engines.py crash``), reopened in a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import kuzu
import numpy as np

from benchmarks.jsonfile import write_json, write_markdown
from benchmarks.percentile import percentile
from benchmarks.perf import kuzu_native as kn
from benchmarks.perf import synth
from benchmarks.perf.corpus import load
from benchmarks.perf.engines import (
    F32,
    Bm25sLexical,
    NumpyVector,
    TantivyLexical,
    UsearchVector,
    dir_bytes,
    exact_topk,
)
from benchmarks.provenance import Run
from graphrecall import ingest as ing
from graphrecall.embed import SentenceTransformerEmbedder, normalize_rows
from graphrecall.store import rounds as q
from graphrecall.store import schema
from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.text import query_terms

DATA = Path("../shared/data/longmemeval/longmemeval_s_dev.json.gz")
K = 60
DIM = 384
LEXICAL = ("kuzu_fts", "tantivy", "bm25s")
VECTOR = ("kuzu_hnsw", "numpy", "usearch")
FLOOR_SIZES = (1, 100)
NASTY = [
    "What's the name of my cat?",
    'he said "hello": where? (when) [why] {how}',
    "C++ / C# - node.js ~fuzzy^2 *wild* field:value AND OR NOT",
    "title:foo OR body:bar && !baz || qux",
    '"unbalanced quote and (paren',
    "what is it?",  # stopwords only: an empty query, not an error
    "",
    "Café crème brûlée in Zürich — 3.5 km, 10,000 steps, 1990s",
    "emoji 🎉🎉 and tabs\tnew\nlines",
    "'; DROP TABLE Round; --",
]


def load_now() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def pct(xs: Sequence[float], p: float) -> float:
    return percentile(xs, p) if xs else float("nan")


# -- rows ------------------------------------------------------------------------------------------------------------
@dataclass
class Rows:
    """One stream of product-built rounds, with their messages and sessions (for the Kuzu store)."""

    rounds: list[RoundRow] = field(default_factory=list)
    vecs: F32 = field(default_factory=lambda: np.empty((0, DIM), np.float32))
    messages: dict[str, MessageRow] = field(default_factory=dict)
    sessions: dict[str, datetime] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.rounds]

    @property
    def terms(self) -> list[str]:
        return [r.terms for r in self.rounds]


def embed_cached(path: Path, texts: list[str], embedder: SentenceTransformerEmbedder) -> F32:
    """MiniLM vectors of ``texts``, from ``path`` (.npy + a .json of the texts) when they match."""
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists() and json.loads(meta.read_text()) == texts:
        loaded: F32 = np.load(path)
        return loaded
    t0 = time.perf_counter()
    vecs = normalize_rows(np.asarray(embedder.embed(texts), dtype=np.float32))
    print(f"  embedded {len(texts)} texts in {time.perf_counter() - t0:.0f} s", flush=True)
    np.save(path, vecs)
    meta.write_text(json.dumps(texts))
    return vecs


def make_rows(
    data: Path, base_rounds: int, total: int, out: Path, embedder: SentenceTransformerEmbedder
) -> tuple[Rows, list[str], F32]:
    corpus = load(data)
    base = corpus.take_rounds(base_rounds)
    base_r = [r for s in base for r in s.rounds]
    user_texts = [ing.embedding_texts(r)[0] for r in base_r]
    print(
        f"base: {len(base_r)} real rounds; embedding user sides (cache {out / 'base_vectors.npy'}) ...",
        flush=True,
    )
    bv = embed_cached(out / "base_vectors.npy", user_texts, embedder)
    vectors = synth.BaseVectors(
        {r.id: bv[i] for i, r in enumerate(base_r)}, {r.id: bv[i] for i, r in enumerate(base_r)}
    )
    questions = list(dict.fromkeys(t for t, _ in corpus.questions))
    qv = embed_cached(out / "query_vectors.npy", questions, embedder)
    grower = synth.StoreGrower(base, vectors, sigma=0.35, seed=7)
    rows = Rows()
    vec_parts: list[F32] = []
    while grower.rounds < total:
        b = grower._next_batch(total, 5000)
        grower.rounds += len(b.rounds)
        rows.rounds.extend(b.rounds)
        vec_parts.append(np.stack(b.user).astype(np.float32))
        rows.messages.update({m.id: m for m in b.messages})
        rows.sessions.update({x.id: x.started_at for x in b.sessions})
    rows.vecs = np.concatenate(vec_parts)
    return rows, questions, qv


def write_round(
    txn: WriteTxn, r: RoundRow, msgs: list[MessageRow], at: datetime, vecs: F32, new_session: bool
) -> None:
    q.write_batch(
        txn,
        new_sessions=[SessionRow(r.session_id, at)] if new_session else [],
        messages=msgs,
        rounds=[r],
        user_vecs=vecs,
        reply_vecs=vecs,
        replaced_round_ids=[],
        dim=DIM,
    )


def fresh_docs(rows: Rows, start: int, n: int, tag: str) -> list[tuple[RoundRow, list[MessageRow], F32]]:
    """``n`` rounds after the prefix, each renamed into its own new single-round session: the small writes."""
    out = []
    for j, r in enumerate(rows.rounds[start : start + n]):
        sid = f"{tag}{j}"
        msgs = [rows.messages[m] for m in r.message_ids]
        new_msgs = [MessageRow(f"{sid}#{i}", sid, i, m.role, m.text, m.at) for i, m in enumerate(msgs)]
        rr = RoundRow(
            id=f"{sid}@0",
            session_id=sid,
            idx=0,
            text=r.text,
            user_text=r.user_text,
            reply_text=r.reply_text,
            terms=r.terms,
            at=r.at,
            message_ids=[m.id for m in new_msgs],
        )
        out.append((rr, new_msgs, rows.vecs[start + j : start + j + 1]))
    return out


# -- Kuzu ------------------------------------------------------------------------------------------------------------
def kuzu_files_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def build_kuzu(
    path: Path, rows: Rows, n: int, embedder_id: str, *, other_indexes: bool = True
) -> dict[str, Any]:
    """The product schema, the first ``n`` rounds COPYed in, then each product index built once; bytes after a
    CHECKPOINT at each step, so each index's share of the footprint is measured, not guessed."""
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    with synth.raw_scope(path, embedder_id=embedder_id, dim=DIM, buffer_pool_size=4 << 30) as (conn, txn):
        out = _load_rounds(conn, txn, rows, n)
        out["bytes_no_index"] = kuzu_files_bytes(path)
        stmts = schema.kuzu_index_statements()
        fts = [s for s in stmts if "'round_fts'" in s]
        vec = [s for s in stmts if "'round_user_vec'" in s]
        rest = [s for s in stmts if s not in fts and s not in vec] if other_indexes else []
        out["other_indexes_built"] = other_indexes
        for label, group in (("round_fts", fts), ("round_user_vec", vec), ("other_indexes", rest)):
            t0 = time.perf_counter()
            for s in group:
                conn.execute(s)
            out[f"{label}_build_s"] = time.perf_counter() - t0
            conn.execute("CHECKPOINT")
            out[f"bytes_after_{label}"] = kuzu_files_bytes(path)
            print(f"  kuzu {label}: {out[f'{label}_build_s']:.1f} s", flush=True)
    out["fts_bytes"] = out["bytes_after_round_fts"] - out["bytes_no_index"]
    out["hnsw_bytes"] = out["bytes_after_round_user_vec"] - out["bytes_after_round_fts"]
    out["total_bytes"] = out["bytes_after_other_indexes"]
    return out


def _load_rounds(conn: Any, txn: Any, rows: Any, n: int) -> dict[str, Any]:
    """The first ``n`` rounds of ``rows`` into the scope, 5,000 per transaction; the load time."""
    t0 = time.perf_counter()
    seen: set[str] = set()
    for a in range(0, n, 5000):
        chunk = rows.rounds[a : min(n, a + 5000)]
        sids = [r.session_id for r in chunk if r.session_id not in seen]
        sids = list(dict.fromkeys(sids))
        seen.update(sids)
        conn.execute("BEGIN TRANSACTION")
        q.write_batch(
            txn(),
            new_sessions=[SessionRow(s, rows.sessions[s]) for s in sids],
            messages=[rows.messages[m] for r in chunk for m in r.message_ids],
            rounds=chunk,
            user_vecs=rows.vecs[a : a + len(chunk)],
            reply_vecs=rows.vecs[a : a + len(chunk)],
            replaced_round_ids=[],
            dim=DIM,
        )
        conn.execute("COMMIT")
    conn.execute("CHECKPOINT")
    return {"load_s": time.perf_counter() - t0}


def open_kuzu(path: Path, embedder_id: str) -> ScopeDatabase:
    return ScopeDatabase.standalone(path, embedder_id=embedder_id, dim=DIM, buffer_pool_size=256 << 20)


def copy_kuzu(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    for p in src.parent.glob(src.name + "*"):
        if p.is_file():
            shutil.copy2(p, dst.parent / (dst.name + p.name[len(src.name) :]))


# -- derived engines -------------------------------------------------------------------------------------------------
def build_derived(work: Path, rows: Rows, n: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    ids, terms, vecs = rows.ids[:n], rows.terms[:n], rows.vecs[:n]
    for name, fn in (
        ("tantivy", lambda p: TantivyLexical.build(p, ids, terms)),
        ("bm25s", lambda p: Bm25sLexical.build(p, ids, terms)),
        ("numpy", lambda p: NumpyVector.build(p, ids, vecs)),
        ("usearch", lambda p: UsearchVector.build(p, ids, vecs)),
    ):
        p = work / name
        t0 = time.perf_counter()
        eng = fn(p)
        s = time.perf_counter() - t0
        eng.close()
        out[name] = {"build_s": s, "bytes": dir_bytes(p)}
        print(f"  {name}: built in {s:.1f} s, {dir_bytes(p) / 1e6:.2f} MB", flush=True)
    return out


def open_derived(work: Path, rows: Rows, n: int) -> dict[str, Any]:
    docs = [t.split() for t in rows.terms[:n]]
    return {
        "tantivy": TantivyLexical(work / "tantivy"),
        "bm25s": Bm25sLexical.open(work / "bm25s", docs),
        "numpy": NumpyVector(work / "numpy", DIM),
        "usearch": UsearchVector.open(work / "usearch", DIM),
    }


# -- measurements ----------------------------------------------------------------------------------------------------
def timed(fn: Callable[[Any], list[str]], inputs: Sequence[Any]) -> tuple[list[float], list[list[str]]]:
    for x in inputs[:3]:
        fn(x)
    ms, res = [], []
    for x in inputs:
        t0 = time.perf_counter()
        r = fn(x)
        ms.append((time.perf_counter() - t0) * 1000)
        res.append(r)
    return ms, res


def overlap(a: list[str], b: list[str], k: int) -> float:
    ref = set(b[:k])
    return len(set(a[:k]) & ref) / len(ref) if ref else 1.0


def measure_queries(
    db: ScopeDatabase, eng: dict[str, Any], questions: list[str], qv: F32, mat: F32, ids: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": load_now()}
    lex: dict[str, Callable[[str], list[str]]] = {
        "kuzu_fts": lambda t: [i for i, _ in kn.kuzu_fts_search(db, "Round", "round_fts", query_terms(t), K)],
        "tantivy": lambda t: eng["tantivy"].search(query_terms(t).split(), K),
        "bm25s": lambda t: eng["bm25s"].search(query_terms(t).split(), K),
    }
    lex_res: dict[str, list[list[str]]] = {}
    for name, fn in lex.items():
        ms, res = timed(fn, questions)
        lex_res[name] = res
        out[name] = {"p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95), "n": len(ms)}
    for name in ("tantivy", "bm25s"):
        pairs = list(zip(lex_res[name], lex_res["kuzu_fts"], strict=True))
        out[name]["top10_overlap_kuzu_fts"] = statistics.fmean(overlap(a, b, 10) for a, b in pairs)
        out[name]["top60_overlap_kuzu_fts"] = statistics.fmean(overlap(a, b, K) for a, b in pairs)
    exact = [[ids[i] for i in exact_topk(mat, v, K)] for v in qv]
    vec: dict[str, Callable[[Any], list[str]]] = {
        "kuzu_hnsw": lambda v: [i for i, _ in kn.kuzu_vector_search(db, "Round", "round_user_vec", v, K)],
        "numpy": lambda v: eng["numpy"].search(v, K),
        "usearch": lambda v: eng["usearch"].search(v, K),
    }
    for name, fn in vec.items():
        ms, res = timed(fn, list(qv))
        out[name] = {
            "p50_ms": pct(ms, 50),
            "p95_ms": pct(ms, 95),
            "n": len(ms),
            "recall@10": statistics.fmean(overlap(a, b, 10) for a, b in zip(res, exact, strict=True)),
            "recall@60": statistics.fmean(overlap(a, b, K) for a, b in zip(res, exact, strict=True)),
        }
    out["load_after"] = load_now()
    return out


def _p50_writes(fn: Callable[[int], None], n: int, budget_s: float) -> tuple[list[float], int]:
    ms: list[float] = []
    t_all = time.perf_counter()
    for j in range(n):
        t0 = time.perf_counter()
        fn(j)
        ms.append((time.perf_counter() - t0) * 1000)
        if time.perf_counter() - t_all > budget_s and j >= 2:
            break
    return ms, len(ms)


def measure_writes(
    work: Path, kz: Path, rows: Rows, n: int, embedder_id: str, n_writes: int, budget_s: float
) -> dict[str, Any]:
    """Single durable writes on a copy of each artefact (p50, growth) vs the same documents in one batch."""
    out: dict[str, Any] = {"load_before": load_now()}
    docs = fresh_docs(rows, n, n_writes, f"wr{n}-")
    scratch = work / "scratch"
    # Kuzu: the product write path (one transaction, COPY, commit with its checkpoint), both indexes maintained.
    res: dict[str, Any] = {}
    for mode in ("single", "batch"):
        shutil.rmtree(scratch, ignore_errors=True)
        dst = scratch / "k.kuzu"
        copy_kuzu(kz, dst)
        db = open_kuzu(dst, embedder_id)
        before = kuzu_files_bytes(dst)
        if mode == "single":

            def one(j: int, db: ScopeDatabase = db) -> None:
                r, msgs, v = docs[j]
                with db.write() as txn:
                    write_round(txn, r, msgs, r.at, v, True)

            ms, done = _p50_writes(one, n_writes, budget_s)
            res.update(p50_ms=pct(ms, 50), p95_ms=pct(ms, 95), writes=done)
        else:
            done = res["writes"]
            with db.write() as txn:
                q.write_batch(
                    txn,
                    new_sessions=[SessionRow(r.session_id, r.at) for r, _, _ in docs[:done]],
                    messages=[m for _, msgs, _ in docs[:done] for m in msgs],
                    rounds=[r for r, _, _ in docs[:done]],
                    user_vecs=np.concatenate([v for _, _, v in docs[:done]]),
                    reply_vecs=np.concatenate([v for _, _, v in docs[:done]]),
                    replaced_round_ids=[],
                    dim=DIM,
                )
        db.close()
        res[f"growth_{mode}_bytes"] = kuzu_files_bytes(dst) - before
    out["kuzu"] = res
    # Derived engines.
    terms = [r.terms for r, _, _ in docs]
    ids = [r.id for r, _, _ in docs]
    vecs = np.concatenate([v for _, _, v in docs])
    for name in ("tantivy", "bm25s", "numpy", "usearch"):
        res = {}
        for mode in ("single", "batch"):
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.copytree(work / name, scratch / name)
            eng: Any = open_derived_one(name, scratch / name, rows, n)
            before = dir_bytes(scratch / name)
            lexical = name in ("tantivy", "bm25s")
            if mode == "single":

                def one_write(j: int, eng: Any = eng, lexical: bool = lexical) -> None:
                    eng.add([ids[j]], [terms[j]] if lexical else vecs[j : j + 1])

                ms, done = _p50_writes(one_write, n_writes, budget_s)
                res.update(p50_ms=pct(ms, 50), p95_ms=pct(ms, 95), writes=done)
            else:
                done = res["writes"]
                eng.add(ids[:done], terms[:done] if lexical else vecs[:done])
            eng.close()
            res[f"growth_{mode}_bytes"] = dir_bytes(scratch / name) - before
        out[name] = res
        print(f"  writes {name}: p50 {res['p50_ms']:.1f} ms over {res['writes']}", flush=True)
    print(f"  writes kuzu: p50 {out['kuzu']['p50_ms']:.1f} ms over {out['kuzu']['writes']}", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    out["load_after"] = load_now()
    return out


def open_derived_one(name: str, path: Path, rows: Rows, n: int) -> Any:
    if name == "tantivy":
        return TantivyLexical(path)
    if name == "bm25s":
        return Bm25sLexical.open(path, [t.split() for t in rows.terms[:n]])
    if name == "numpy":
        return NumpyVector(path, DIM)
    return UsearchVector.open(path, DIM)


def natural_language(db: ScopeDatabase, eng: dict[str, Any]) -> dict[str, Any]:
    """Every nasty query through our terms into each lexical engine (must not raise), and tantivy's own query
    parser fed the raw text (what we avoid), for contrast."""
    import tantivy

    out: dict[str, Any] = {"queries": NASTY, "errors": {}, "raw_tantivy_parser_errors": []}
    fns: dict[str, Callable[[str], list[str]]] = {
        "kuzu_fts": lambda t: [
            i for i, _ in kn.kuzu_fts_search(db, "Round", "round_fts", query_terms(t), 10)
        ],
        "tantivy": lambda t: eng["tantivy"].search(query_terms(t).split(), 10),
        "bm25s": lambda t: eng["bm25s"].search(query_terms(t).split(), 10),
    }
    for name, fn in fns.items():
        errs = []
        for t in NASTY:
            try:
                fn(t)
            except Exception as e:
                errs.append(f"{t!r}: {type(e).__name__}: {e}")
        out["errors"][name] = errs
    idx = eng["tantivy"].index
    for t in NASTY:
        try:
            idx.searcher().search(idx.parse_query(t, ["terms"]), 10)
        except Exception as e:
            out["raw_tantivy_parser_errors"].append(f"{t!r}: {type(e).__name__}: {str(e)[:80]}")
    _ = tantivy
    return out


def semantics(work: Path, embedder_id: str) -> dict[str, Any]:
    """OR semantics and stemming on three tiny documents, the same answers expected from every lexical engine."""
    texts = {
        "d1": "I adopted a cat named Tom last year.",
        "d2": "We're running late: the meeting moved to 3.5pm.",
        "d3": 'He said "C++ is hard"; I said no.',
    }
    from graphrecall.text import index_terms

    cases = {
        "adopting cats?": {"d1"},
        "meetings running (late) OR something-unknown-xyz": {"d2"},
        "c++ hard?": {"d3"},
        "Tom's meeting": {"d1", "d2"},
    }
    ids, terms = list(texts), [index_terms(t) for t in texts.values()]
    base = work / "semantics"
    shutil.rmtree(base, ignore_errors=True)
    engines: dict[str, Callable[[str], list[str]]] = {}
    tv = TantivyLexical.build(base / "tantivy", ids, terms)
    bm = Bm25sLexical.build(base / "bm25s", ids, terms)
    engines["tantivy"] = lambda t: tv.search(query_terms(t).split(), 10)
    engines["bm25s"] = lambda t: bm.search(query_terms(t).split(), 10)
    db = open_kuzu(base / "k.kuzu", embedder_id)
    at = datetime(2024, 1, 1)
    v = np.zeros((1, DIM), np.float32)
    v[0, 0] = 1
    for i, (rid, t) in enumerate(texts.items()):
        sid = f"s{i}"
        m = MessageRow(f"{sid}#0", sid, 0, "user", t, at)
        r = RoundRow(rid, sid, 0, t, t, "", index_terms(t), at, [m.id])
        with db.write() as txn:
            write_round(txn, r, [m], at, v, True)
    engines["kuzu_fts"] = lambda t: [
        i for i, _ in kn.kuzu_fts_search(db, "Round", "round_fts", query_terms(t), 10)
    ]
    out: dict[str, Any] = {}
    for name, fn in engines.items():
        out[name] = {c: {"got": sorted(fn(c)), "ok": set(fn(c)) == want} for c, want in cases.items()}
    db.close()
    shutil.rmtree(base, ignore_errors=True)
    return out


def crash_test(src: Path, trials: int, seed: int = 1) -> dict[str, Any]:
    """kill -9 a writer child at a random moment, reopen in another child: opens? acknowledged rows lost?"""
    rng = random.Random(seed)
    out: dict[str, Any] = {"source": str(src), "trials": trials, "load_before": load_now()}
    scratch = src.parent / "crash"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for name in ("tantivy", "bm25s", "usearch", "numpy"):
        rec = []
        for _ in range(trials):
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            shutil.copytree(src / name, scratch / name)
            ack = scratch / "ack.txt"
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.perf.engines",
                    "crash",
                    name,
                    str(scratch / name),
                    str(ack),
                ],
                stdout=subprocess.PIPE,
                env=env,
            )
            assert child.stdout is not None
            child.stdout.readline()  # "ready"
            time.sleep(rng.uniform(0.3, 2.5))
            child.send_signal(signal.SIGKILL)
            child.wait()
            lines = ack.read_text().split()
            acked = int(lines[-1])
            chk = subprocess.run(
                [sys.executable, "-m", "benchmarks.perf.engines", "check", name, str(scratch / name)],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            if chk.returncode != 0:
                got: dict[str, Any] = {
                    "opens": False,
                    "error": f"reopen died rc={chk.returncode}: {chk.stderr[-200:]}",
                }
            else:
                got = json.loads(chk.stdout.strip().splitlines()[-1])
            got["acked"] = acked
            got["writes_acked_in_child"] = len(lines) - 1
            got["lost_acked"] = max(0, acked - got["count"]) if got.get("opens") else None
            rec.append(got)
        out[name] = {
            "trials": rec,
            "opened": sum(1 for r in rec if r.get("opens")),
            "lost_acked_rows_total": sum(r["lost_acked"] or 0 for r in rec),
            "needs_rebuild": sum(1 for r in rec if not r.get("opens") or (r["lost_acked"] or 0) > 0),
        }
        print(
            f"  crash {name}: opened {out[name]['opened']}/{trials}, lost acked rows {out[name]['lost_acked_rows_total']}",
            flush=True,
        )
    shutil.rmtree(scratch, ignore_errors=True)
    out["load_after"] = load_now()
    return out


# -- report ----------------------------------------------------------------------------------------------------------
def _mb(b: float) -> str:
    return f"{b / 1e6:.2f}"


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"# Index layer: Kuzu vs derived indexes\n\n`{res['command']}`\n",
        f"load average start {res['load_start']}, end {res.get('load_end')}\n",
    ]
    lines.append("## Query latency (k = 60, warm, ms; query embedding not included)\n")
    lines.append("| rounds | engine | p50 | p95 | quality |")
    lines.append("|---:|---|---:|---:|---|")
    for s in res["sizes"]:
        qd = s["queries"]
        for e in LEXICAL:
            d = qd[e]
            qual = (
                "reference"
                if e == "kuzu_fts"
                else f"top-10 overlap with Kuzu FTS {d['top10_overlap_kuzu_fts']:.3f}"
            )
            lines.append(f"| {s['rounds']:,} | {e} | {d['p50_ms']:.2f} | {d['p95_ms']:.2f} | {qual} |")
        for e in VECTOR:
            d = qd[e]
            lines.append(
                f"| {s['rounds']:,} | {e} | {d['p50_ms']:.2f} | {d['p95_ms']:.2f} | recall@10 {d['recall@10']:.3f}, @60 {d['recall@60']:.3f} |"
            )
    lines.append("\n## Footprint (MB on disk; bytes per round)\n")
    lines.append(
        "| rounds | Kuzu whole store | Kuzu all indexes | Kuzu FTS (built first) | tantivy | bm25s | numpy | usearch |"
    )
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in res["floors"] + res["sizes"]:
        k, d = s["kuzu_build"], s["derived_build"]
        n = s["rounds"]
        ix = k["total_bytes"] - k["bytes_no_index"]
        cells = [
            f"{_mb(k['total_bytes'])} ({k['total_bytes'] / n:,.0f})",
            f"{_mb(ix)} ({ix / n:,.0f})",
            f"{_mb(k['fts_bytes'])} ({k['fts_bytes'] / n:,.0f})",
        ]
        cells += [
            f"{_mb(d[e]['bytes'])} ({d[e]['bytes'] / n:,.0f})"
            for e in ("tantivy", "bm25s", "numpy", "usearch")
        ]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    lines.append("\n## Build time (s)\n")
    lines.append("| rounds | Kuzu rows | Kuzu FTS | Kuzu HNSW (user) | tantivy | bm25s | numpy | usearch |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in res["sizes"]:
        k, d = s["kuzu_build"], s["derived_build"]
        lines.append(
            f"| {s['rounds']:,} | {k['load_s']:.1f} | {k['round_fts_build_s']:.1f} | {k['round_user_vec_build_s']:.1f} | "
            + " | ".join(f"{d[e]['build_s']:.2f}" for e in ("tantivy", "bm25s", "numpy", "usearch"))
            + " |"
        )
    lines.append(
        "\n## Small durable writes (one round each) and growth: 30 single writes vs the same in one batch\n"
    )
    lines.append(
        "| rounds | engine | write p50 ms | p95 ms | writes | growth single KB | growth batch KB | ratio |"
    )
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    for s in res["sizes"]:
        for e in ("kuzu", "tantivy", "bm25s", "numpy", "usearch") if "writes" in s else ():
            w = s["writes"][e]
            ratio = (
                w["growth_single_bytes"] / w["growth_batch_bytes"]
                if w["growth_batch_bytes"] > 0
                else float("nan")
            )
            lines.append(
                f"| {s['rounds']:,} | {e} | {w['p50_ms']:.1f} | {w['p95_ms']:.1f} | {w['writes']} | {w['growth_single_bytes'] / 1e3:,.0f} | {w['growth_batch_bytes'] / 1e3:,.0f} | {ratio:.2f} |"
            )
    if "crash" in res:
        c = res["crash"]
        lines.append(f"\n## kill -9 during writes ({c['trials']} trials each, source {c['source']})\n")
        lines.append("| engine | reopened | acknowledged rows lost | needed a rebuild |")
        lines.append("|---|---:|---:|---:|")
        for e in ("tantivy", "bm25s", "usearch", "numpy"):
            lines.append(
                f"| {e} | {c[e]['opened']}/{c['trials']} | {c[e]['lost_acked_rows_total']} | {c[e]['needs_rebuild']} |"
            )
    if "natural_language" in res:
        nl = res["natural_language"]
        lines.append("\n## Natural-language safety\n")
        for e, errs in nl["errors"].items():
            lines.append(f"- {e} via our terms: {len(errs)} errors over {len(nl['queries'])} queries")
        lines.append(
            f"- tantivy's own query parser on the raw text: {len(nl['raw_tantivy_parser_errors'])} errors"
        )
        for e, cases in res.get("semantics", {}).items():
            ok = sum(1 for c in cases.values() if c["ok"])
            lines.append(f"- OR semantics / stemming / punctuation cases, {e}: {ok}/{len(cases)} as expected")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.indexes", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/indexes"))
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument(
        "--reuse", action="store_true", help="reuse artefacts built by an earlier run under OUT/work"
    )
    p.add_argument("--base-rounds", type=int, default=3000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--writes", type=int, default=30)
    p.add_argument("--write-budget-s", type=float, default=60.0, help="per engine and size (min 3 writes)")
    p.add_argument("--crash-trials", type=int, default=5)
    p.add_argument(
        "--kuzu-full-max",
        type=int,
        default=10_000,
        help="build the product's other Kuzu indexes (reply HNSW, empty Fact/Event/Entity indexes) only up to this "
        "size; above it the Kuzu store has Round FTS + user HNSW (saves two HNSW builds at 100k)",
    )
    p.add_argument("--skip", default="", help="comma-separated: crash,writes,floors")
    p.add_argument(
        "--report", action="store_true", help="only re-render OUT/indexes.md from OUT/indexes.json"
    )
    a = p.parse_args(argv)
    if a.report:
        measured = json.loads((a.out / "indexes.json").read_text())
        md = markdown(measured)
        # The figures are the measuring run's, and so is the record (a report from before records existed: this
        # re-rendering's, which then says only when the Markdown was made).
        write_markdown(
            a.out / "indexes.md", md, Run.recorded(measured["run"]) if "run" in measured else Run.begin()
        )
        print(md)
        return 0
    this_run = Run.begin()
    skip = {x for x in a.skip.split(",") if x}
    sizes = sorted(int(x) for x in a.sizes.split(","))
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    res: dict[str, Any] = {
        "command": "python -m benchmarks.perf.indexes " + " ".join(sys.argv[1:] if argv is None else argv),
        "load_start": load_now(),
        "cpus": os.cpu_count(),
        "k": K,
        "floors": [],
        "sizes": [],
    }
    # One BLAS thread: a search serves one user among many, and on a loaded 2-core box OpenBLAS's second thread made
    # a 10k x 384 scan 50x slower (waiting for a descheduled thread), which would measure the box, not the engine.
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
    res["blas_threads"] = 1
    prev_path = out / "indexes.json"
    prev = json.loads(prev_path.read_text()) if a.reuse and prev_path.exists() else {}
    prev_sizes = {e["rounds"]: e for e in prev.get("sizes", [])}
    st = SentenceTransformerEmbedder()
    rows, questions, qv = make_rows(a.data, a.base_rounds, max(sizes) + a.writes, out, st)
    questions, qv = questions[: a.queries], qv[: a.queries]
    res["queries"] = len(questions)
    import tantivy
    import usearch

    res["versions"] = {
        "kuzu": kuzu.__version__,
        "tantivy": getattr(tantivy, "__version__", "unknown"),
        "usearch": usearch.__version__,
    }
    for n in ([] if "floors" in skip else list(FLOOR_SIZES)) + sizes:
        work = out / "work" / str(n)
        kz = work / "kuzu" / "store.kuzu"
        meta = work / "build.json"
        print(f"size {n}: build ...", flush=True)
        if a.reuse and meta.exists() and kz.exists():
            built = json.loads(meta.read_text())
        else:
            shutil.rmtree(work, ignore_errors=True)
            built = {
                "kuzu_build": build_kuzu(kz, rows, n, st.id, other_indexes=n <= a.kuzu_full_max),
                "derived_build": build_derived(work, rows, n),
                "load": load_now(),
            }
            meta.write_text(json.dumps(built))
        entry: dict[str, Any] = {"rounds": n, **built}
        if n in FLOOR_SIZES:
            res["floors"].append(entry)
            continue
        db = open_kuzu(kz, st.id)
        eng = open_derived(work, rows, n)
        print(f"size {n}: queries ...", flush=True)
        entry["queries"] = measure_queries(db, eng, questions, qv, rows.vecs[:n], rows.ids[:n])
        for e in (*LEXICAL, *VECTOR):
            d = entry["queries"][e]
            print(f"  {e:10s} p50 {d['p50_ms']:7.2f} ms  p95 {d['p95_ms']:7.2f} ms", flush=True)
        if n == sizes[0]:
            res["natural_language"] = natural_language(db, eng)
        for e in eng.values():
            e.close()
        db.close()
        if "writes" not in skip:
            print(f"size {n}: writes ...", flush=True)
            entry["writes"] = measure_writes(work, kz, rows, n, st.id, a.writes, a.write_budget_s)
        elif "writes" in prev_sizes.get(n, {}):  # kept from the earlier run, marked as such
            entry["writes"] = {**prev_sizes[n]["writes"], "from_earlier_run": prev.get("command")}
        res["sizes"].append(entry)
        write_json(out / "indexes.partial.json", res, this_run, indent=1, partial=True)
    res["semantics"] = semantics(out / "work", st.id)
    if "floors" in skip and prev.get("floors"):
        res["floors"] = prev["floors"]
    if "crash" in skip and "crash" in prev:
        res["crash"] = {**prev["crash"], "from_earlier_run": prev.get("command")}
    if "crash" not in skip:
        src_n = max([s for s in sizes if s <= 10_000] or [sizes[0]])
        print(f"crash test on the {src_n}-round artefacts ...", flush=True)
        res["crash"] = crash_test(out / "work" / str(src_n), a.crash_trials)
    res["load_end"] = load_now()
    res["total_s"] = time.perf_counter() - t_all
    write_json(out / "indexes.json", res, this_run, indent=1)
    md = markdown(res)
    write_markdown(out / "indexes.md", md, this_run)
    print()
    print(md)
    print(f"wrote {out / 'indexes.json'}, {out / 'indexes.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
