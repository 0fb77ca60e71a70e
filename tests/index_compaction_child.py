"""A process that compacts one derived index and is killed at a chosen step, for
``tests/integration/test_index_compact_crash.py``:

    python -m tests.index_compaction_child DIR vector|lexical STEP

``STEP`` is what the compaction tells its ``on_step`` ("written": the fresh directory complete, not swapped in;
"aside": between the swap's two renames); the process SIGKILLs itself there. ``none``: it compacts to the end, prints
``done`` and SIGKILLs itself (no close). The lexical index is rebuilt from ``rows()``, what the store would hold.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from graphrecall.index import ExactVectorIndex, TantivyLexicalIndex
from graphrecall.index.lexical import Row

DIM = 16


def rows(live: bool = True) -> list[Row]:
    """The lexical index's documents: 200 of which 40 stay live (``live``) or all of them."""
    return [(f"d{i}", f"word{i % 7} topic{i % 3} common") for i in range(200) if not live or i % 5 == 0]


def main() -> None:
    directory, kind, step = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    def on_step(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    if kind == "vector":
        ExactVectorIndex(directory, embedder_id="e", dim=DIM, half=True).compact(on_step=on_step)
    else:
        idx = TantivyLexicalIndex(directory)
        idx.compact(rows(), mark=idx.mark, on_step=on_step)
    print("done", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
