"""``ScopeLog``: one scope's log, tail and flusher, wired together.

The order of the wiring is the correctness argument, so it lives in one place:
- ``append``: the log commits (durable, acknowledged), then the tail takes the entry (visible to the next search),
  then the flusher is told (it may start a batch);
- flush: ``apply`` commits to Kuzu, then the log deletes the entries, then the tail forgets them. At every moment a
  round is in the tail or in Kuzu or both, never in neither (searches take the tail snapshot before Kuzu);
- open: the tail is rebuilt from the log and the flusher finds the entries due at once (crash replay), unless
  ``hold`` keeps them: a small scope that lives in its log until it grows (``store.logs``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from graphrecall.store.wal.entry import WriteEntry
from graphrecall.store.wal.flusher import Apply, Flusher
from graphrecall.store.wal.log import WriteLog
from graphrecall.store.wal.tail import TailIndex


class ScopeLog:
    def __init__(
        self,
        path: str | Path,
        *,
        dim: int,
        apply: Apply,
        max_bytes: int | None = None,
        start: bool = True,
        hold: Callable[[TailIndex], bool] | None = None,
        check: Callable[[WriteLog], None] | None = None,
        **flusher_options: Any,
    ) -> None:
        """``flusher_options`` go to ``Flusher`` (batch_entries, max_age_s, backoff_s, ...); ``hold(tail)`` is
        the flusher's ``hold``, asked with this log's tail; ``check(log)`` runs before anything is read from the
        log and may refuse it by raising (a log written with another embedder)."""
        self.log = WriteLog(path, max_bytes=max_bytes)
        try:
            if check is not None:
                check(self.log)
            self.tail = TailIndex(dim, self.log.pending())
            held = None if hold is None else (lambda: hold(self.tail))
            self.flusher = Flusher(
                self.log, apply, on_flushed=self.tail.trim, hold=held, start=start, **flusher_options
            )
        except BaseException:  # refused, a damaged entry (WriteLogCorrupt), bad options: nothing stays open
            self.log.close()
            raise

    def append(self, entry: WriteEntry) -> WriteEntry:
        """Durable and searchable when this returns; raises ``WriteLogError`` (nothing acknowledged) otherwise."""
        stored = self.log.append(entry)
        self.tail.add(stored)
        self.flusher.notify()
        return stored

    def flush(self) -> int:
        return self.flusher.flush()

    def close(self, *, flush: bool = True) -> None:
        """Stop the flusher, flush what is left (unless ``flush=False``: it is replayed at the next open), close."""
        try:
            self.flusher.close(flush=flush)
        finally:
            self.log.close()

    def __enter__(self) -> ScopeLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
