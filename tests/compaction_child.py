"""A process that compacts the bucket of ``tests/compaction_store.py``'s store and is stopped at a chosen step, for
``tests/integration/test_compact_crash.py``:

    python -m tests.compaction_child ROOT STEP N kill|pause

``kill``: SIGKILL itself when the compaction tells ``STEP`` (``store.compact.OnStep``) for the ``N``-th time (a step
no compaction tells, ``none``: the parent kills it by timing); ``pause``: print ``paused`` there and sleep until
killed. Prints ``ready`` before the compaction starts and ``done`` after it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from tests import compaction_store as cs

from graphrecall import testing


def main() -> None:
    root, step, nth, mode = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    told = 0

    def on_step(name: str) -> None:
        nonlocal told
        if name != step:
            return
        told += 1
        if told < nth:
            return
        if mode == "pause":
            print("paused", flush=True)
            time.sleep(600)
        os.kill(os.getpid(), signal.SIGKILL)

    with cs.open_memory(root) as m:
        print("ready", flush=True)
        testing.pool(m).compact(cs.bucket_path(root), on_step=on_step)
        print("done", flush=True)


if __name__ == "__main__":
    main()
