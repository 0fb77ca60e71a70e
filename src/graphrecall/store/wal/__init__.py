"""The write path of a live service: a durable per-scope log that acknowledges writes, a flusher that moves them
into Kuzu in batches, and an exact index over the not-yet-flushed tail (see ``docs/write-log.md``)."""

from graphrecall.store.wal.entry import ENTRY_VERSION, WriteEntry
from graphrecall.store.wal.flusher import Apply, Flusher, FlushFailed
from graphrecall.store.wal.log import WriteLog, WriteLogCorrupt, WriteLogError, WriteLogFull, log_path
from graphrecall.store.wal.scope import ScopeLog
from graphrecall.store.wal.tail import TailIndex, TailSnapshot

__all__ = [
    "ENTRY_VERSION",
    "Apply",
    "FlushFailed",
    "Flusher",
    "ScopeLog",
    "TailIndex",
    "TailSnapshot",
    "WriteEntry",
    "WriteLog",
    "WriteLogCorrupt",
    "WriteLogError",
    "WriteLogFull",
    "log_path",
]
