"""Learning documents: a text split into passages, stored as a session of their own, replaced when it changes.

Why a session: a document's passages stored as the messages of one session (role ``document``, each a round of its
own) are searched by everything that searches rounds (BM25, vectors, the passages of long turns, time, reranking,
context packing), erased, exported and imported by what erases, exports and imports sessions, with no store,
index or schema of their own (``graphrecall.docref`` says how a passage names its source and headings).

Learning a source again (``add_document``):

* the same passages as stored: nothing is written (``unchanged``), whatever the date, so a repeated
  ``graphrecall learn docs/*.md`` is cheap and changes nothing;
* other passages: the stored version is erased through ``erase`` (its messages, rounds, vectors, index entries, and
  the facts and events extracted from it) and the new one added (``replaced``). Not one transaction: a search that
  runs between the two misses the document, and a process killed between them leaves it unlearned until it is
  learned again (which then adds it). One scope's learns are serialized here, so two learns of one source never
  interleave their erase and add (an add of the same message ids would otherwise keep the other's text).

A document given without a source is named by its title and a hash of its text (``docref.text_source``).

Everything is checked before anything is written: the split (a document of headings alone has no passage), a
session of that id that is not a document (never overwritten), an LLM when extraction is asked for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from graphrecall import docref
from graphrecall.documents import as_messages, detect_format, split
from graphrecall.errors import InvalidInput, NotFound
from graphrecall.models import IngestResult, LearnedDocument, Role, Scope, Session
from graphrecall.params import AddDocumentParams, AddSessionParams, EraseParams
from graphrecall.services.erasure import ErasureService
from graphrecall.services.history import HistoryService
from graphrecall.services.knowledge import KnowledgeService
from graphrecall.services.writing import WritingService


@dataclass(frozen=True)
class DocumentService:
    writing: WritingService
    history: HistoryService
    erasure: ErasureService
    knowledge: KnowledgeService
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _locks: dict[Scope, threading.Lock] = field(default_factory=dict)

    def _lock(self, scope: Scope) -> threading.Lock:
        """Taken before every other lock of the scope (``services.access``), for a whole learn."""
        with self._guard:
            return self._locks.setdefault(scope, threading.Lock())

    def add_document(self, scope: Scope, p: AddDocumentParams) -> LearnedDocument:
        fmt = detect_format(p.document, p.source or "") if p.format == "auto" else p.format
        found = split(p.document, fmt)
        if not found.passages:
            raise InvalidInput("the document holds no text besides its headings", where="document")
        source = p.source if p.source is not None else docref.text_source(p.document, found.title)
        messages = as_messages(source, found.passages)
        sid = docref.session_id(source)
        if p.extract:
            self.knowledge.require_llm()
        learned = LearnedDocument(
            source=source,
            session_id=sid,
            status="added",
            format=fmt,
            passages=len(messages),
            title=found.title,
        )
        with self._lock(scope):
            stored = self._stored(scope, sid)
            if stored is not None and [m.content for m in stored.messages] == [m.content for m in messages]:
                learned = learned.model_copy(update={"status": "unchanged"})
                return (
                    self._extracted(scope, learned)
                    if p.extract and stored.extract_status != "done"
                    else learned
                )
            if stored is not None:
                self.erasure.erase(scope, EraseParams(session_ids=[sid]))
                learned = learned.model_copy(update={"status": "replaced", "removed": len(stored.messages)})
            session = {"messages": messages, "session_id": sid, "date": p.date}
            self.writing.add_session(scope, AddSessionParams.model_validate(session))
            return self._extracted(scope, learned) if p.extract else learned

    def _stored(self, scope: Scope, sid: str) -> Session | None:
        """The stored version of the document, if any; a session of that id that is not a document is refused."""
        if not self.writing.access.stored(scope):
            return None
        try:
            stored = self.history.get_session(scope, sid)
        except NotFound:
            return None
        if any(m.role != Role.document for m in stored.messages):
            raise InvalidInput(
                f"session {sid!r} holds a conversation, not a document: it is left alone", where="source"
            )
        return stored

    def _extracted(self, scope: Scope, learned: LearnedDocument) -> LearnedDocument:
        """The document's extraction, queued or run as ``add_session(extract=True)``'s would be."""
        done = self.knowledge.after_ingest(scope, learned.session_id, IngestResult())
        return learned.model_copy(
            update={"extraction": done.extraction, "extraction_job": done.extraction_job}
        )
