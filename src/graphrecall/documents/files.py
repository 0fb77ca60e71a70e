"""A document file as text and a format: Markdown, plain text, or a PDF's text through pypdf.

Where the file is read: in the process that has it (the Python API, the ``learn`` command), never on a server, which
takes a document's text (HTTP, MCP) and must not read paths a client names. Every refusal is ``InvalidInput`` whose
``where`` is the path, saying what is wrong with the file (missing, a folder, binary, not UTF-8, a type we do not
read, a PDF without text), so nothing is stored from a file we could not read whole.

Why pypdf: maintained, pure Python (no system library, installs anywhere the rest does), and its text extraction
keeps reading order well enough for passages; it is an optional extra (``graphrecall[pdf]``) because most memories
never see a PDF. A PDF becomes its pages' text joined by form feeds, which the plain-text splitter reads as paragraph
breaks, so no passage runs across a page.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from graphrecall.documents.split import MARKDOWN_SUFFIXES, TEXT_SUFFIXES, detect_format
from graphrecall.errors import InvalidInput, NotAvailable
from graphrecall.models import DocumentFormat

PDF_EXTRA = "pdf"
_SNIFF_BYTES = 8192


def read_document(
    path: str | os.PathLike[str], fmt: DocumentFormat | None = None
) -> tuple[str, DocumentFormat]:
    """The text of the file at ``path`` and the format to split it as. ``fmt`` forces Markdown or plain text for a
    file of any name (a PDF is always read as a PDF); without it, the suffix decides (``.md``, ``.txt``, ``.pdf``;
    no suffix: Markdown when it has ``#`` headings) and any other suffix is refused."""
    p = Path(path)
    where = str(p)
    if not p.exists():
        raise InvalidInput("no such file", where=where)
    if p.is_dir():
        raise InvalidInput("is a directory, not a document (name its files)", where=where)
    try:
        with p.open("rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError as e:
        raise InvalidInput(f"cannot be read: {e.strerror or e}", where=where) from None
    suffix = p.suffix.lower()
    if head.startswith(b"%PDF-") or suffix == ".pdf":
        return read_pdf(p), "text"
    known = suffix in MARKDOWN_SUFFIXES | TEXT_SUFFIXES or suffix == ""
    if fmt is None and not known:
        raise InvalidInput(
            f"unsupported document type {suffix!r}: learn reads Markdown (.md), plain text (.txt) and PDF (.pdf); "
            "give the format (markdown or text) to read another text file",
            where=where,
        )
    if b"\x00" in head:
        raise InvalidInput("is a binary file, not text (Markdown, plain text or PDF)", where=where)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidInput(f"is not UTF-8 text (byte {e.start}: {e.reason})", where=where) from None
    if not text.strip():
        raise InvalidInput("is empty: nothing to learn", where=where)
    return text, fmt or detect_format(text, p.name)


def read_pdf(path: Path) -> str:
    """The text of every page, pages separated by form feeds. ``NotAvailable`` names the extra when pypdf is
    missing; a PDF that cannot be parsed, is encrypted, or has no text layer (a scan) is ``InvalidInput``."""
    pypdf = _pypdf()
    where = str(path)
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput("is an encrypted PDF: decrypt it first", where=where)
        pages = [page.extract_text() or "" for page in reader.pages]
    except InvalidInput:
        raise
    except Exception as e:  # pypdf raises several kinds (PdfReadError, ValueError...) for a broken file
        raise InvalidInput(f"is not a readable PDF ({type(e).__name__}: {e})", where=where) from None
    if not any(page.strip() for page in pages):
        raise InvalidInput("is a PDF without text (scanned pages need OCR first)", where=where)
    return "\f".join(page.strip() for page in pages)


def _pypdf() -> Any:
    try:
        return importlib.import_module("pypdf")
    except ImportError:
        raise NotAvailable(
            f"reading a PDF needs pypdf, which is not installed: pip install 'graphrecall[{PDF_EXTRA}]'"
        ) from None
