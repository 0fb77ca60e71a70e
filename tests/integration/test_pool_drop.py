"""Erasing a scope never closes its database under a request that still holds it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import StoreBusy
from graphrecall.store import rounds as q
from graphrecall.testing import database, pool

SCOPE = Scope(org_id="acme", user_id="alice")


def _memory(root: Path) -> Memory:
    mem = Memory.open(root, embedder=HashingEmbedder(32))
    mem.add_session(SCOPE, [{"role": "user", "content": "my sister lives in Porto"}], session_id="s1")
    mem.flush()  # into Kuzu, where the held database can see it
    return mem


def test_forget_waits_for_a_request_holding_the_database(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        erased = threading.Event()
        with database(mem, SCOPE) as db:
            t = threading.Thread(target=lambda: (mem.forget(SCOPE), erased.set()))
            t.start()
            time.sleep(0.3)
            assert not erased.is_set()  # still waiting for this request
            assert not db.closed
            assert q.counts(db)["Session"] == 1  # the request can go on reading
        t.join(10)
        assert erased.is_set()
        assert mem.scopes() == []
        assert mem.search(SCOPE, "sister") == []


def test_forget_gives_up_with_store_busy_and_erases_nothing(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        with database(mem, SCOPE) as db:
            with pytest.raises(StoreBusy, match="nothing was erased"):
                pool(mem).drop(SCOPE, wait_seconds=0.2)
            assert not db.closed
        assert [h.session_id for h in mem.search(SCOPE, "sister")] == ["s1"]
        assert mem.forget(SCOPE) is True
