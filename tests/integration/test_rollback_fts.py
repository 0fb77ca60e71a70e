"""A rolled-back write must not break full-text search for the writes after it.

Kuzu 0.11.3, measured: after a transaction that COPYed into a full-text-indexed table is rolled back, the next COPY
into that table is left out of the index for good, and deleting one of those rows later crashes the process.
``ScopeDatabase`` rebuilds the table's FTS index right after such a rollback, and at the next open if the process
died first (a marker file). Each scenario runs in a child process, so a regression shows as a failed test rather
than a segfault of the test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SETUP = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from graphrecall import Memory, Scope, Settings, testing, writer
    from graphrecall.embed import HashingEmbedder
    from graphrecall.store import rounds as q
    from graphrecall.store.database import ScopeDatabase, WriteTxn
    from graphrecall.text import query_terms

    writer.LOG_MAX_ROUNDS = 0  # every write is one Kuzu transaction, as the scenario needs

    root = Path(sys.argv[1])
    scope = Scope(org_id="acme", user_id="alice")

    def chat(user, reply="Noted."):
        return [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]

    def open_memory():
        return Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root))

    def bm25(mem, word):
        with testing.database(mem, scope, create=False) as db:
            return sorted({rid.split("@")[0] for rid, _ in q.fts_search(db, "Round", "round_fts", query_terms(word), 10)})

    def fail_after_round_copy(mem, session_id, text):
        real = WriteTxn.copy
        def copy(self, table, data):
            real(self, table, data)
            if table == "ROUND_IN":  # after the Round rows (and their index entries) were written
                raise RuntimeError("simulated failure mid-write")
        WriteTxn.copy = copy
        try:
            mem.add_session(scope, chat(text), session_id=session_id)
        except RuntimeError as e:
            assert "simulated" in str(e), e
        else:
            raise AssertionError("the write did not fail")
        finally:
            WriteTxn.copy = real
    """
)

AFTER_FAILURE = textwrap.dedent(
    """
    def check(mem):
        mem.add_session(scope, chat("My marimba teacher is Ms Alder."), session_id="s2")
        mem.add_session(scope, chat("We booked a trip to Porto."), session_id="s3")
        found = {"marimba": bm25(mem, "marimba"), "porto": bm25(mem, "porto"), "zebra": bm25(mem, "zebra")}
        # Appending to s2 rewrites its last round: a delete of the row the bug would have left out of the index.
        mem.add_session(scope, chat("My marimba teacher is Ms Alder.") + chat("She also teaches vibraphone."),
                        session_id="s2")
        found["vibraphone"] = bm25(mem, "vibraphone")
        found["sessions"] = sorted(s.id for s in mem.sessions(scope))
        print(json.dumps(found))
    """
)


def run(script: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SETUP + AFTER_FAILURE + textwrap.dedent(script), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )


EXPECTED = {
    "marimba": ["s2"],
    "porto": ["s3"],
    "zebra": [],
    "vibraphone": ["s2"],
    "sessions": ["s0", "s2", "s3"],
}


def test_writes_after_a_rolled_back_write_stay_searchable(tmp_path: Path) -> None:
    proc = run(
        """
        with open_memory() as mem:
            mem.add_session(scope, chat("I adopted a puppy called Biscuit."), session_id="s0")
            fail_after_round_copy(mem, "s1", "A zebra and a quokka.")
            check(mem)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == EXPECTED
    assert "rebuilt the full-text index of Round" in proc.stderr
    assert not list(tmp_path.rglob("*.fts-rebuild"))


def test_the_index_is_repaired_at_the_next_open_if_the_process_died_first(tmp_path: Path) -> None:
    died = run(
        """
        with open_memory() as mem:
            mem.add_session(scope, chat("I adopted a puppy called Biscuit."), session_id="s0")
            ScopeDatabase._rebuild_fts = lambda self, tables: os._exit(3)  # die between rollback and repair
            fail_after_round_copy(mem, "s1", "A zebra and a quokka.")
        """,
        tmp_path,
    )
    assert died.returncode == 3, died.stderr[-3000:]
    (marker,) = tmp_path.rglob("*.fts-rebuild")
    assert marker.read_text().split() == ["Round"]
    proc = run(
        """
        with open_memory() as mem:
            check(mem)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == EXPECTED
    assert "rebuilt the full-text index of Round" in proc.stderr
    assert not marker.exists()
