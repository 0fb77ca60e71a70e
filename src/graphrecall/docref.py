"""How a passage of a learned document names where it comes from: its session id and its location line.

A document (``Memory.add_document``) is stored as a session of its own whose messages, of role ``document``, are its
passages, so every part of retrieval (BM25, vectors, passages of long turns, time, reranking, context packing, erase,
export) works on it unchanged. What makes a passage a document's is written into the stored text itself, on its
first line, so it travels wherever the message goes (the write log, Kuzu, the derived indexes, an export and its
import, a shared scope) with no schema change and no second store to keep in step:

    install.md › Install › Linux
    Run the installer again after upgrading the kernel.

The first part is the source (the name the document was learned under), the others the headings above the passage
(its *title path*); the passage's position is its message's place in the session. Why one line of text rather than
columns: a column would be a schema change (a migration of every bucket, the write-log entry format, the export
format) for three strings that only documents have; a line is read back by ``parse_location`` in one place.

Why the session id is a hash of the source: learning the same source again must find the earlier version (to
replace it, or to leave it alone when nothing changed) from the name alone; ``doc-`` and not ``doc:`` because a
colon never occurs in an id (it separates a bucket key's prefix, ``store.buckets``).

This module sits on the ground floor and imports nothing of graphrecall: ``ingest`` writes the line, retrieval and
context read it.
"""

from __future__ import annotations

import hashlib
import re

DOCUMENT_ROLE = "document"
"""The role of a document passage (``models.Role.document``): a round of its own, read as the user's side."""
SESSION_PREFIX = "doc-"
SEPARATOR = " › "
"""Between the source and each heading of a location line (U+203A: rare in sources and headings, and read as "in"
by a person or a model; one found in a name is written as ``>``)."""
MAX_SOURCE_CHARS = 500
_ROUND_PREFIX = f"{DOCUMENT_ROLE}: "  # a round's text is ``role: text`` per message (``ingest.build_rounds``)
_SPACE = re.compile(r"\s+")


def session_id(source: str) -> str:
    """The session a document learned as ``source`` is stored in: ``doc-`` and 16 hex digits of its SHA-256 (a
    collision between two sources of one user needs ~4 billion sources)."""
    return SESSION_PREFIX + hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def text_source(text: str, title: str | None) -> str:
    """The source of a document given without one: its title (or first line), cut to 60 characters, and 8 hex digits
    of its text's SHA-256 (``Kettle manual [3f9a2c1b]``). Why not refuse it (a caller over MCP or HTTP often has
    only the text): a name that is its content's makes learning the same text again change nothing, and a changed
    text a document of its own rather than a replacement of another one that happened to share a title."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    name = clean_part(title or first.lstrip("#").strip())
    name = name if len(name) <= 60 else name[:59].rstrip() + "…"
    return f"{name} [{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}]"


def clean_part(text: str) -> str:
    """A source or heading as one line part: whitespace collapsed, the separator's arrow written as ``>``."""
    return _SPACE.sub(" ", text.replace("›", ">")).strip()


def location_line(source: str, title_path: tuple[str, ...] | list[str]) -> str:
    """``source › heading › subheading``: the first line of a passage's stored text."""
    parts = [clean_part(source), *(p for p in map(clean_part, title_path) if p)]
    return SEPARATOR.join(parts)


def passage_text(source: str, title_path: tuple[str, ...] | list[str], body: str) -> str:
    """What a passage's message holds: its location line, then its text."""
    return f"{location_line(source, title_path)}\n{body}"


def split_passage(content: str) -> tuple[str, list[str], str]:
    """A passage message's content back into (source, title path, text)."""
    line, _, body = content.partition("\n")
    source, *path = line.split(SEPARATOR)
    return source, path, body


def indexed_text(content: str) -> str:
    """What of a passage is embedded and indexed: its headings and its text, not its source. The headings say what
    a passage is about when it does not ("Run it again after upgrading"); the source is a name, often a path whose
    words (``home``, ``tmp``, a user name) would be terms of every passage and match questions about anything."""
    _, path, body = split_passage(content)
    return f"{SEPARATOR.join(path)}\n{body}" if path else body


def parse_location(round_text: str) -> tuple[str, list[str], str] | None:
    """(source, title path, passage text) of a document passage's round text (``document: ...``), else None."""
    if not round_text.startswith(_ROUND_PREFIX):
        return None
    return split_passage(round_text[len(_ROUND_PREFIX) :])
