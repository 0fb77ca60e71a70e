"""Documents as memory: a file or a text split into passages that are stored as a session of their own.

``split`` cuts a text into passages with the headings above each (pure), ``files`` reads a Markdown, plain-text or
PDF file, and ``as_messages`` turns passages into the messages of the document's session, each starting with its
location line (``graphrecall.docref``). ``services.documents`` stores them, replacing an earlier version.
"""

from __future__ import annotations

from graphrecall import docref
from graphrecall.documents.files import read_document
from graphrecall.documents.split import MAX_PASSAGE_CHARS, Passage, Split, detect_format, split
from graphrecall.models import Message, Role

__all__ = ["MAX_PASSAGE_CHARS", "Passage", "Split", "as_messages", "detect_format", "read_document", "split"]


def as_messages(source: str, passages: list[Passage]) -> list[Message]:
    """The document's session: one ``document`` message per passage, in order (its position is its index)."""
    return [
        Message(role=Role.document, content=docref.passage_text(source, p.title_path, p.text))
        for p in passages
    ]
