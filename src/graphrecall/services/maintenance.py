"""Upkeep that runs by itself: per scope, once it changed and then stayed idle, a backup and then consolidation
(duplicate facts merged, events linked to their entities, and with an LLM the summaries that are due).

When a scope is due. Each run looks at the scope's counts (sessions, messages, facts, events, entities) and keeps
them in a journal (``<root>/maintenance.sqlite``). A scope is due when its counts differ from those of its last
maintenance (something changed) and have not moved for ``idle_s`` (nobody is talking to it now: consolidating in
the middle of a conversation would plan against facts that the next turn changes). The counts are read through the
operations, not from the files, so the rule holds whatever the store's layout, and a run by ``graphrecall
maintain`` from cron sees what a server wrote. ``force`` skips both conditions.

Backups. Before anything is rewritten, the scope is exported whole (``export_scope``: sessions, every fact version,
events, entities) to ``<root>/backups/<org>/<user>/<UTC time>.json.gz``, written to a temporary file and renamed,
so a backup is complete or absent; the newest ``keep_backups`` are kept. ``graphrecall import FILE`` restores one.

Cost. One run spends at most ``max_llm_calls`` model calls over all the scopes it maintains (consolidation defers
what does not fit to the next run); the calls, tokens and cost are in the result and the journal. Without an LLM,
consolidation merges near-identical facts and links entities only (docs/months.md).

Salience is computed at search time from each fact's reinforcement and last mention (``retrieve.salience``), so
there is nothing of it to refresh here.

Compaction. A scope's rows live in a bucket shared with other scopes, whose file grows with the operations it served
(Kuzu 0.11.3 reuses little of what it frees). Each maintenance of a scope also measures its bucket's free space
(``store.freespace``; at most once per ``MEASURE_EVERY_S`` per bucket, since every scope of a pass asks about the
same few buckets) and rewrites the bucket into a fresh file once that share passes ``compact_free_fraction``
(``Settings``), whether or not the scope itself was due: the space is the bucket's, not the scope's
(``DatabasePool.compact``: the bucket's requests wait meanwhile). A dry run says whether it would. What was found
and done is the result's ``compaction``.

The scope's derived indexes (``index.scope``) keep what was deleted on disk too: each pass also rewrites those of
the scope whose dead share passes the same bound (``ScopeDatabase.compact_indexes``: the bucket's writes wait, its
searches go on; a dry run rewrites nothing). It is cheap to ask (counts in memory, tantivy's ``meta.json``), so
every pass asks. What it did is logged, not part of the result (a field there changes the HTTP API's schema).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphrecall.config import COMPACT_FREE_FRACTION
from graphrecall.errors import EmbedderMismatch, NotFound, StorageFull, StoreBusy
from graphrecall.index import IndexSpace
from graphrecall.models import Compaction, Maintenance, MaintenanceRun, Scope, ScopeStats
from graphrecall.params import ConsolidateParams, MaintainParams
from graphrecall.services.history import HistoryService
from graphrecall.services.knowledge import KnowledgeService
from graphrecall.store.freespace import FreeSpace
from graphrecall.store.pool import DatabasePool

log = logging.getLogger(__name__)

JOURNAL_FILE = "maintenance.sqlite"
BACKUP_DIR = "backups"
COUNTED = ("sessions", "messages", "facts", "events", "entities")
# A bucket's free space is measured again after this long (a pass asks once per scope; a bucket holds many).
MEASURE_EVERY_S = 300.0
# Below this much free space a bucket is not rewritten whatever its share: a rewrite would gain less than it costs.
COMPACT_MIN_FREE_BYTES = 1 << 20


class MaintenanceService:
    def __init__(
        self,
        root: Path,
        history: HistoryService,
        knowledge: KnowledgeService,
        *,
        pool: DatabasePool | None = None,
        compact_free_fraction: float = COMPACT_FREE_FRACTION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``pool``: the buckets to compact (none: maintenance never compacts)."""
        self.root = root
        self.history = history
        self.knowledge = knowledge
        self.pool = pool
        self.compact_free_fraction = compact_free_fraction
        self.clock = clock
        self._lock = threading.Lock()  # one maintenance at a time per process: they share the LLM budget
        self._measured: dict[Path, tuple[float, FreeSpace]] = {}  # bucket -> (when, its free space)

    def maintain(self, scope: Scope, p: MaintainParams) -> Maintenance:
        done = self._consolidation(scope, p)
        with self._lock:
            compaction = self._compaction(scope, p)
            self._index_compaction(scope, p)
            return done.model_copy(update={"compaction": compaction})

    def _consolidation(self, scope: Scope, p: MaintainParams) -> Maintenance:
        """The scope's own part: a backup and consolidation, when it changed and then stayed idle."""
        with self._lock:
            now = self.clock()
            stats = self.history.stats(scope)
            counts = _counts(stats)
            journal = Journal(self.root / JOURNAL_FILE)
            try:
                seen = journal.observe(scope, counts, now)
                changed = counts != seen.maintained
                idle = now - seen.stable_since
                if not p.force and not changed:
                    return Maintenance(
                        scope=scope, ran=False, reason="nothing changed since the last maintenance"
                    )
                if not p.force and idle < p.idle_s:
                    return Maintenance(
                        scope=scope,
                        ran=False,
                        reason=f"changed, but in use: idle for {idle:.0f} s of the {p.idle_s:.0f} s asked",
                    )
                if not stats.sessions:
                    return Maintenance(scope=scope, ran=False, reason="the scope holds nothing")
                summaries = self.knowledge.llm is not None
                if p.dry_run:
                    plan = self.knowledge.consolidate(
                        scope,
                        ConsolidateParams(dry_run=True, summaries=summaries),
                        max_llm_calls=p.max_llm_calls,
                    )
                    return Maintenance(
                        scope=scope, ran=False, dry_run=True, reason="dry run", consolidation=plan
                    )
                backup = self._backup(scope, now, keep=p.keep_backups)
                done = self.knowledge.consolidate(
                    scope, ConsolidateParams(summaries=summaries), max_llm_calls=p.max_llm_calls
                )
                after = _counts(self.history.stats(scope))
                run = MaintenanceRun(
                    at=datetime.fromtimestamp(now, UTC).replace(tzinfo=None),
                    backup=str(backup),
                    facts_merged=sum(len(m.superseded) for m in done.merges),
                    event_links=len(done.event_links),
                    summaries=len(done.summaries),
                    deferred=done.deferred,
                    errors=len(done.errors),
                    llm_calls=done.llm_calls,
                    cost_usd=done.cost_usd,
                )
                journal.maintained(scope, after, now, run)
                return Maintenance(
                    scope=scope, ran=True, reason="changed, then idle", run=run, consolidation=done
                )
            finally:
                journal.close()

    def _compaction(self, scope: Scope, p: MaintainParams) -> Compaction | None:
        """The bucket holding the scope's rows, measured, and rewritten when its free share passes the bound."""
        if self.pool is None:
            return None
        now = self.clock()
        found = self.pool.bucket_path(scope)
        if found is None or not found.exists():
            return None
        seen = self._measured.get(found)
        if seen is None or now - seen[0] >= MEASURE_EVERY_S:
            try:
                measured = self.pool.free_space(scope)
            except StoreBusy as e:  # held by another process (a server, while cron maintains): its own upkeep
                log.info("bucket %s: not measured: %s", found, e)
                return None
            if measured is None:
                return None
            seen = (now, measured[1])
            self._measured[found] = seen
        free = seen[1]
        about = Compaction(
            bucket=str(found.relative_to(self.root)),
            bytes=free.file_bytes,
            free_bytes=free.free_bytes,
            free_fraction=round(free.free_fraction, 4),
            bound=self.compact_free_fraction,
            compacted=False,
            reason="its free space passed the bound",
        )
        if free.free_bytes < COMPACT_MIN_FREE_BYTES:
            why = f"{free.free_bytes} bytes free: less than a rewrite is worth ({COMPACT_MIN_FREE_BYTES})"
            return about.model_copy(update={"reason": why})
        if free.free_fraction < self.compact_free_fraction:
            why = f"{free.free_fraction:.0%} free: below the bound ({self.compact_free_fraction:.0%})"
            return about.model_copy(update={"reason": why})
        if p.dry_run:
            return about.model_copy(update={"reason": "dry run: its free space is past the bound"})
        try:
            done = self.pool.compact(found)
        except (StoreBusy, StorageFull) as e:
            return about.model_copy(update={"reason": f"not compacted now: {e}"})
        except Exception as e:  # the old file is the bucket still (store.compact): the scope's result stands
            log.exception("bucket %s: compaction failed", found)
            return about.model_copy(update={"reason": f"compaction failed (the bucket is as it was): {e}"})
        finally:
            self._measured.pop(found, None)
        return about.model_copy(
            update={
                "compacted": True,
                "bytes_after": done.bytes_after,
                "seconds": round(done.seconds, 3),
            }
        )

    def _index_compaction(self, scope: Scope, p: MaintainParams) -> list[IndexSpace]:
        """The scope's derived indexes, rewritten where their dead share passes the bound (module docstring);
        what each held. Nothing when the scope has no rows in Kuzu (a scope in its write log has no indexes)."""
        if self.pool is None or not self.pool.exists(scope):
            return []
        try:
            with self.pool.acquire(scope, create=False) as db:
                found = db.compact_indexes(self.compact_free_fraction, dry_run=p.dry_run)
        except (StoreBusy, NotFound, EmbedderMismatch) as e:  # held by another process, gone, another model's
            log.info("derived indexes of %s: not compacted: %s", scope, e)
            return []
        except Exception:  # each index is the old one or the new one (index.vector, index.lexical)
            log.exception("derived indexes of %s: compaction failed", scope)
            return []
        for s in found:
            if s.bytes_after is not None:
                log.info(
                    "compacted the %s index of %s: %d -> %d bytes (%.0f%% dead) in %.3f s",
                    s.name,
                    scope,
                    s.bytes,
                    s.bytes_after,
                    100 * s.dead_fraction,
                    s.seconds or 0.0,
                )
        return found

    def history_of(self, scope: Scope) -> tuple[list[tuple[datetime, dict[str, int]]], list[MaintenanceRun]]:
        """The counts each run saw change (growth over time) and the maintenance runs, oldest first."""
        journal = Journal(self.root / JOURNAL_FILE)
        try:
            return journal.growth(scope), journal.runs(scope)
        finally:
            journal.close()

    def forget(self, scope: Scope) -> None:
        """A scope erased: its journal rows go; its backups stay, since they exist to undo mistakes (the erasure
        docs say how to remove them too: ``<root>/backups/<org>/<user>``)."""
        journal = Journal(self.root / JOURNAL_FILE)
        try:
            journal.forget(scope)
        finally:
            journal.close()

    def _backup(self, scope: Scope, now: float, *, keep: int) -> Path:
        folder = self.root / BACKUP_DIR / scope.org_id / scope.user_id
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S%fZ")
        final = folder / f"{stamp}.json.gz"
        partial = folder / f".{stamp}.json.gz.partial"
        doc = self.history.export_scope(scope)
        with gzip.open(partial, "wt", encoding="utf-8") as f:
            f.write(doc.model_dump_json())
        with open(partial, "rb") as f:
            os.fsync(f.fileno())
        partial.replace(final)
        for old in sorted(folder.glob("*.json.gz"))[:-keep]:
            old.unlink()
        return final


class _Seen:
    def __init__(self, maintained: dict[str, int] | None, stable_since: float) -> None:
        self.maintained = maintained
        self.stable_since = stable_since


class Journal:
    """What maintenance saw of each scope: the latest counts and since when they held, the counts after its last
    run, every change of counts (growth) and every run."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        with self.db:
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS scopes (org TEXT, user TEXT, counts TEXT, stable_since REAL,"
                " maintained TEXT, PRIMARY KEY (org, user))"
            )
            self.db.execute("CREATE TABLE IF NOT EXISTS growth (org TEXT, user TEXT, at REAL, counts TEXT)")
            self.db.execute("CREATE TABLE IF NOT EXISTS runs (org TEXT, user TEXT, at REAL, run TEXT)")

    def observe(self, scope: Scope, counts: dict[str, int], now: float) -> _Seen:
        key = (scope.org_id, scope.user_id)
        row = self.db.execute(
            "SELECT counts, stable_since, maintained FROM scopes WHERE org=? AND user=?", key
        )
        found = row.fetchone()
        text = json.dumps(counts, sort_keys=True)
        with self.db:
            if found is None or found[0] != text:
                stable_since = now
                self.db.execute(
                    "INSERT INTO scopes (org, user, counts, stable_since, maintained) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT(org, user) DO UPDATE SET counts=excluded.counts, stable_since=excluded.stable_since",
                    (*key, text, now, None),
                )
                self.db.execute("INSERT INTO growth VALUES (?, ?, ?, ?)", (*key, now, text))
            else:
                stable_since = float(found[1])
        maintained = json.loads(found[2]) if found is not None and found[2] else None
        return _Seen(maintained, stable_since)

    def maintained(self, scope: Scope, counts: dict[str, int], now: float, run: MaintenanceRun) -> None:
        key = (scope.org_id, scope.user_id)
        text = json.dumps(counts, sort_keys=True)
        with self.db:
            self.db.execute(
                "UPDATE scopes SET counts=?, stable_since=?, maintained=? WHERE org=? AND user=?",
                (text, now, text, *key),
            )
            self.db.execute("INSERT INTO growth VALUES (?, ?, ?, ?)", (*key, now, text))
            self.db.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", (*key, now, run.model_dump_json()))

    def growth(self, scope: Scope) -> list[tuple[datetime, dict[str, int]]]:
        rows = self.db.execute(
            "SELECT at, counts FROM growth WHERE org=? AND user=? ORDER BY at", (scope.org_id, scope.user_id)
        ).fetchall()
        out: list[tuple[datetime, dict[str, int]]] = []
        for at, counts in rows:
            parsed = json.loads(counts)
            if not out or out[-1][1] != parsed:
                out.append((datetime.fromtimestamp(at, UTC).replace(tzinfo=None), parsed))
        return out

    def runs(self, scope: Scope) -> list[MaintenanceRun]:
        rows = self.db.execute(
            "SELECT run FROM runs WHERE org=? AND user=? ORDER BY at", (scope.org_id, scope.user_id)
        ).fetchall()
        return [MaintenanceRun.model_validate_json(r[0]) for r in rows]

    def forget(self, scope: Scope) -> None:
        key = (scope.org_id, scope.user_id)
        with self.db:
            for table in ("scopes", "growth", "runs"):
                self.db.execute(f"DELETE FROM {table} WHERE org=? AND user=?", key)

    def close(self) -> None:
        self.db.close()


def _counts(stats: ScopeStats) -> dict[str, int]:
    data: dict[str, Any] = stats.model_dump()
    return {k: int(data[k]) for k in COUNTED}
