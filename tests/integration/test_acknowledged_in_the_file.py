"""What a write operation acknowledged is in the database file when it returns, not only in Kuzu's WAL.

Why: Kuzu 0.11.3 cannot always replay its WAL after a process was killed during a checkpoint (the replay fails on
duplicated primary keys), and recovery then sets the WAL aside (``store.recovery``); the commits it held are partly
lost (``benchmarks/perf/kuzu_wal_kills.py``: 1-15 commits in 9 kills of 57). So no operation may acknowledge a
write that lives in that WAL alone: every write is checkpointed before it returns, or stays in the write log until
a checkpoint covers it. The test takes the worst case: a child process runs the operations and dies without
closing anything (``os._exit``), and the parent removes every Kuzu WAL before it reopens the store.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder

SCOPE = Scope(org_id="acme", user_id="ana")

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from graphrecall import Memory, Scope, Settings
    from graphrecall.embed import HashingEmbedder

    root = Path(sys.argv[1])
    scope = Scope(org_id="acme", user_id="ana")
    m = Memory.open(root, embedder=HashingEmbedder(384), settings=Settings(root=root))
    m.add_session(scope, [{"role": "user", "content": "I live in Munich with my dog."}], session_id="s1")
    munich = m.add_fact(scope, "The user lives in Munich").fact.id
    dog = m.add_fact(scope, "The user has a beagle called Biscuit").fact.id
    tea = m.add_fact(scope, "The user drinks green tea every morning").fact.id
    berlin = m.add_fact(scope, "The user moved to Berlin").fact.id
    m.supersede(scope, munich, berlin, reason="moved")
    m.erase(scope, fact_ids=[dog])
    m.feedback(scope, tea, useful=True)
    print(json.dumps({"munich": munich, "dog": dog, "tea": tea, "berlin": berlin}), flush=True)
    os._exit(0)  # killed: nothing closed, nothing flushed or checkpointed on the way out
    """
)


def test_every_acknowledged_fact_write_survives_a_lost_kuzu_wal(tmp_path: Path) -> None:
    root = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ids = json.loads(done.stdout.strip().splitlines()[-1])
    wals = list(root.rglob("*.kuzu.wal"))
    for wal in wals:  # what recovery does when the WAL cannot be replayed
        wal.unlink()
    for shadow in root.rglob("*.kuzu.shadow"):
        shadow.unlink()
    with Memory.open(root, embedder=HashingEmbedder(384), settings=Settings(root=root)) as m:
        current = {f.id: f for f in m.facts(SCOPE)}
        every = {f.id: f for f in m.facts(SCOPE, include_superseded=True)}
        assert ids["dog"] not in every  # the erase held
        assert set(current) == {ids["tea"], ids["berlin"]}  # the supersession held
        assert every[ids["munich"]].superseded_by == ids["berlin"]
        assert current[ids["tea"]].reinforcement == 2  # the feedback held
        assert [s.id for s in m.sessions(SCOPE)] == ["s1"]  # the turn: from the write log if not in the file
