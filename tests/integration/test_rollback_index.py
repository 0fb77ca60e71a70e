"""The derived indexes follow Kuzu's transactions: a rolled-back write leaves no trace in them and does not disturb
the writes after it, and a process that dies between Kuzu's commit and the indexes' finds them rebuilt at the next
open, with the committed write searchable.

(Kuzu 0.11.3's own full-text index, which schema 1 used, lost the COPY after a rolled-back one for good; that is one
reason the indexes moved out of Kuzu.) Each scenario runs in a child process, so a crash shows as a failed test
rather than a segfault of the test run.
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
            return sorted({rid.split("@")[0] for rid, _ in q.lexical_search(db, "round_terms", query_terms(word), 10)})

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
    assert "rebuilt" not in proc.stderr  # nothing to repair: the failed write never reached the indexes


def test_a_death_between_the_kuzu_commit_and_the_index_commit_is_repaired_at_the_next_open(
    tmp_path: Path,
) -> None:
    died = run(
        """
        from graphrecall.store.derived import DerivedIndexes
        with open_memory() as mem:
            mem.add_session(scope, chat("I adopted a puppy called Biscuit."), session_id="s0")
            DerivedIndexes.apply = lambda self, changes, marks: os._exit(3)  # Kuzu committed, the indexes did not
            mem.add_session(scope, chat("A zebra and a quokka."), session_id="s1")
        """,
        tmp_path,
    )
    assert died.returncode == 3, died.stderr[-3000:]
    proc = run(
        """
        with open_memory() as mem:
            print(json.dumps({"zebra": bm25(mem, "zebra"), "biscuit": bm25(mem, "biscuit")}))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"zebra": ["s1"], "biscuit": ["s0"]}
    assert "rebuilt" in proc.stderr and "round_terms" in proc.stderr
