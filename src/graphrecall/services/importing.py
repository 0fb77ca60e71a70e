"""Restoring a whole-scope export: its sessions, then its extracted memory exactly as exported.

The sessions go in like any bulk ingest (idempotent). The extracted part (facts with every version and
SUPERSEDES edge, events, entities, relations) goes in whole, under the scope's knowledge lock, into a scope that
holds no extracted memory, or is skipped when the scope already holds exactly this export's (a repeated import);
anything in between would merge two memories without versioning them against each other, so it is refused before
anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from graphrecall import exchange
from graphrecall.embed import Embedder
from graphrecall.errors import InvalidInput
from graphrecall.models import ImportResult, IngestResult, Scope, ScopeExport
from graphrecall.params import AddSessionsParams, invalid
from graphrecall.services.access import ScopeAccess
from graphrecall.services.writing import WritingService
from graphrecall.store import facts as fq
from graphrecall.store.database import ScopeDatabase


def scope_export(doc: ScopeExport | Mapping[str, Any]) -> ScopeExport:
    """The document as a checked ``ScopeExport``: its shape, then every reference inside it."""
    try:
        export = doc if isinstance(doc, ScopeExport) else ScopeExport.model_validate(doc)
    except ValidationError as e:
        raise invalid(e) from None
    exchange.check(export)
    return export


@dataclass(frozen=True)
class ImportService:
    access: ScopeAccess
    writing: WritingService
    embedder: Embedder

    def import_scope(self, scope: Scope, export: ScopeExport) -> ImportResult:
        skip = False
        if self.access.has_database(scope):
            with self.access.database(scope) as db:
                skip = self._graph_present(db, scope, export)
        sessions = [
            {"session_id": x.id, "date": x.started_at, "messages": x.messages} for x in export.sessions
        ]
        added = (
            self.writing.add_sessions(scope, AddSessionsParams.model_validate({"sessions": sessions}))
            if sessions
            else IngestResult()
        )
        result = ImportResult(
            sessions_added=added.sessions_added,
            messages_added=added.messages_added,
            messages_skipped=added.messages_skipped,
            graph_skipped=skip,
        )
        if skip:
            return result
        if not (export.facts or export.events or export.entities):
            self._statuses_only(scope, export)
            return result
        write = exchange.graph_write(export, self.embedder)
        # created here when the export has no sessions; flushed: the messages facts point to are in Kuzu
        with self.access.flushed(scope, create=True) as db, self.access.knowledge(scope):
            if self._graph_present(db, scope, export):  # written meanwhile by a concurrent import
                return result.model_copy(update={"graph_skipped": True})
            with db.write() as txn:
                fq.write_extraction(txn, write, dim=self.embedder.dim)
                for x in export.sessions:
                    fq.set_extract_status(txn, x.id, x.extract_status, x.extract_error)
        return result.model_copy(
            update={
                "facts": len(export.facts),
                "supersedes": len(export.supersedes),
                "events": len(export.events),
                "entities": len(export.entities),
                "relations": len(export.relations),
            }
        )

    def _statuses_only(self, scope: Scope, export: ScopeExport) -> None:
        """The sessions' extraction states of an export without extracted memory (sessions extracted with nothing
        found, failed or queued): written as they are, so a restored scope is not extracted again."""
        marked = [x for x in export.sessions if x.extract_status != "none" or x.extract_error]
        if not marked:
            return
        with self.access.flushed(scope, create=True) as db, self.access.knowledge(scope), db.write() as txn:
            for x in marked:
                fq.set_extract_status(txn, x.id, x.extract_status, x.extract_error)

    @staticmethod
    def _graph_present(db: ScopeDatabase, scope: Scope, export: ScopeExport) -> bool:
        """Whether the scope already holds exactly the export's extracted memory (True) or none at all (False);
        anything in between is refused."""
        wanted = exchange.graph_ids(export)
        found = {t: fq.existing_ids(db, t, ids) for t, ids in wanted.items()}
        if not any(found.values()):
            if fq.has_extracted(db) or fq.list_entities(db):
                raise InvalidInput(
                    f"scope {scope} already holds other extracted memory; import into a new scope, or forget this "
                    "one first",
                    where="facts",
                )
            return False
        if all(found[t] == set(ids) for t, ids in wanted.items()):
            return True
        raise InvalidInput(
            f"scope {scope} holds part of this export's extracted memory; import into a new scope",
            where="facts",
        )
