"""Large ingest batches are embedded in chunks of texts sorted by length while the writer thread writes the rounds
whose vectors are ready: the result must be the same as one write, and still all or nothing."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings, testing, writer
from graphrecall.embed import HashingEmbedder, TextKind, Vectors
from graphrecall.store import rounds as q
from graphrecall.store.database import WriteTxn
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.text import query_terms


def sessions(n: int) -> list[dict[str, object]]:
    return [
        {
            "session_id": f"s{i}",
            "date": f"2024-03-{1 + i % 28:02d}T10:00:00",
            "messages": [
                {"role": "user", "content": f"Session {i}: my hobby number {i} is pottery-{i}."},
                {"role": "assistant", "content": f"Noted, pottery-{i}."},
                {"role": "user", "content": f"And my favourite tea is kind {i}."},
                {"role": "assistant", "content": "Lovely."},
            ],
        }
        for i in range(n)
    ]


class CountingEmbedder(HashingEmbedder):
    """Counts embed calls (one per chunk of texts) and the texts of each."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls = 0
        self.chunks: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.calls += 1
        self.chunks.append(list(texts))
        return super().embed(texts, kind=kind)


def snapshot(mem: Memory, scope: Scope) -> dict[str, object]:
    mem.flush()  # what a write-log path acknowledged, in Kuzu
    with testing.database(mem, scope, create=False) as db:
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('r', 'Round')}-[:ROUND_IN]->(s:Session) "
            "RETURN r.id, r.terms, s.id, size(r.message_ids) ORDER BY r.id"
        )
        texts = q.kuzu_rounds(db, [r[0] for r in rows])  # a round's text is its messages'
        rows = [[*r, texts[r[0]].text] for r in rows]
        kind = [rid for rid, _ in q.lexical_search(db, "round_terms", query_terms("kind"), 100)]
    return {
        "rounds": rows,
        "counts": mem.stats(scope).model_dump(exclude={"disk_bytes"}),
        "kind": sorted(kind),
    }


def test_chunked_ingest_stores_exactly_what_one_write_stores(
    tmp_path: Path, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = sessions(30)  # 60 rounds
    with Memory.open(
        tmp_path / "one", embedder=HashingEmbedder(64), settings=Settings(root=tmp_path / "one")
    ) as m:
        m.add_sessions(scope, data)
        expected = snapshot(m, scope)
    monkeypatch.setattr(writer, "TEXT_CHUNK", 14)  # 120 texts (a user and a reply side per round): 9 chunks
    monkeypatch.setattr(writer, "LOG_MAX_ROUNDS", 0)  # the chunked path, not the write log
    copies: list[str] = []
    real_copy = WriteTxn.copy

    def copy(self: WriteTxn, table: str, frame: object) -> None:
        copies.append(f"{table}:{threading.current_thread().name.split('_')[0]}")
        real_copy(self, table, frame)

    monkeypatch.setattr(WriteTxn, "copy", copy)
    emb = CountingEmbedder()
    with Memory.open(tmp_path / "chunked", embedder=emb, settings=Settings(root=tmp_path / "chunked")) as m:
        m.add_sessions(scope, data)
        chunk_calls, chunks = emb.calls, list(emb.chunks)
        got = snapshot(m, scope)
        for i in (0, 17, 29):
            [hit] = m.search(scope, f"pottery-{i}", 1)
            assert hit.session_id == f"s{i}"
    assert got["rounds"] == expected["rounds"]
    assert got["counts"] == expected["counts"]
    assert got["kind"] == expected["kind"] and len(got["kind"]) == 30  # every chunk is in the full-text index
    assert chunk_calls == 9
    lengths = [len(t) for chunk in chunks for t in chunk]
    assert lengths == sorted(lengths)  # chunks of similar length over the whole batch: the least padding
    round_copies = [c for c in copies if c.startswith("Round:")]
    assert round_copies and set(round_copies) == {"Round:graphrecall-ingest"}  # written on the writer thread
    assert "Message:graphrecall-ingest" in copies  # the messages too, while the first chunk was embedded


def test_a_failure_in_a_later_chunk_writes_nothing(
    tmp_path: Path, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "TEXT_CHUNK", 10)
    monkeypatch.setattr(writer, "LOG_MAX_ROUNDS", 0)
    emb = CountingEmbedder()
    real_embed = emb.embed

    def embed(texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        if emb.calls == 3:  # the fourth chunk: the rounds of three chunks are written or being written
            raise RuntimeError("embedder crashed (simulated)")
        return real_embed(texts, kind=kind)

    with Memory.open(tmp_path / "s", embedder=emb, settings=Settings(root=tmp_path / "s")) as m:
        m.add_sessions(scope, sessions(2))
        before = m.stats(scope).model_dump(exclude={"disk_bytes"})
        emb.calls = 0
        monkeypatch.setattr(emb, "embed", embed)
        with pytest.raises(RuntimeError, match="simulated"):
            m.add_sessions(scope, sessions(20)[2:])
        assert m.stats(scope).model_dump(exclude={"disk_bytes"}) == before
        monkeypatch.setattr(emb, "embed", real_embed)
        m.add_sessions(scope, sessions(20)[2:])  # and the store takes the same batch afterwards, searchable
        [hit] = m.search(scope, "pottery-13", 1)
        assert hit.session_id == "s13"
        assert m.stats(scope).rounds == 40


def test_searches_run_while_a_chunked_batch_is_written(
    tmp_path: Path, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "TEXT_CHUNK", 16)
    monkeypatch.setattr(writer, "LOG_MAX_ROUNDS", 0)
    errors: list[BaseException] = []
    done = threading.Event()
    results: list[int] = []
    with Memory.open(
        tmp_path / "s", embedder=HashingEmbedder(64), settings=Settings(root=tmp_path / "s")
    ) as m:
        m.add_sessions(scope, sessions(2))

        def search_loop() -> None:
            try:
                while not done.is_set():
                    results.append(len(m.search(scope, "pottery tea", 5)))
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=search_loop) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for start in range(2, 60, 20):
                m.add_sessions(scope, sessions(60)[start : start + 20])  # 40 rounds, 80 texts: 5 chunks each
        finally:
            done.set()
            for t in threads:
                t.join(timeout=60)
        assert not errors, errors
        assert results and min(results) >= 1
        assert m.stats(scope).rounds == 120
        [hit] = m.search(scope, "pottery-59", 1)
        assert hit.session_id == "s59"
