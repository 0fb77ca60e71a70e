"""Documents as memory through the Python API (``Memory.add_document``): passages searched beside the chat, each
hit naming its source and headings, shown in context under its source; re-learning replaces a changed document
and leaves an unchanged one alone; files (Markdown, text, PDF) and bad input; extraction over a document with the
scripted model."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.tinypdf import tiny_pdf

from graphrecall import Memory, Scope
from graphrecall.aio import AsyncMemory
from graphrecall.docref import session_id
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import InvalidInput, NotAvailable
from graphrecall.events import MemoryEvent
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.models import DocumentRef, Role

ANA = Scope(org_id="acme", user_id="ana")
MANUAL = """# Aurora kettle

The Aurora kettle boils a litre of water in three minutes.

## Cleaning

Descale the kettle every month with white vinegar, then rinse it twice.

## Warranty

The warranty lasts two years from the date of purchase.
"""
CHAT = [
    {"role": "user", "content": "I bought a new kettle and a toaster yesterday."},
    {"role": "assistant", "content": "Enjoy them! Tell me how the toaster works out."},
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        m.add_session(ANA, CHAT, session_id="chat-1", date="2024-05-01T10:00:00")
        yield m


def test_passages_are_found_beside_the_chat_and_name_their_source_and_headings(mem: Memory) -> None:
    learned = mem.add_document(ANA, MANUAL, source="manuals/kettle.md", date="2024-05-02")
    sid = session_id("manuals/kettle.md")
    assert (learned.status, learned.session_id, learned.passages, learned.format, learned.title) == (
        "added", sid, 3, "markdown", "Aurora kettle"
    )  # fmt: skip
    hits = mem.search(ANA, "how long is the warranty?", k=4, question_date="2024-06-01")
    assert hits[0].id == f"{sid}@2" and hits[0].session_id == sid and hits[0].kind == "round"
    assert hits[0].document == DocumentRef(
        source="manuals/kettle.md", title_path=["Aurora kettle", "Warranty"], position=2
    )
    assert {h.session_id for h in hits} == {sid, "chat-1"}  # beside the chat, one ranking
    assert all(h.document is None for h in hits if h.session_id == "chat-1")
    ctx = mem.context(ANA, "how do I descale the kettle?", token_budget=400, question_date="2024-06-01")
    assert "### Document manuals/kettle.md — 2024-05-02" in ctx.text
    assert f"[{sid}@1] (document passage 1: Aurora kettle › Cleaning, 2024-05-02" in ctx.text
    assert "Descale the kettle every month with white vinegar" in ctx.text
    assert "document: manuals/kettle.md" not in ctx.text  # the location is said once, in the heading and item
    stored = mem.get_session(ANA, sid)
    assert [m.role for m in stored.messages] == [Role.document] * 3
    assert stored.messages[1].content.startswith("manuals/kettle.md › Aurora kettle › Cleaning\nDescale")
    # Nothing dated after the question (and its one-day slack) is visible: nor is a document learned later.
    assert all(h.session_id != sid for h in mem.search(ANA, "warranty", question_date="2024-04-30"))


def test_the_same_passages_again_write_nothing(mem: Memory) -> None:
    mem.add_document(ANA, MANUAL, source="kettle.md", date="2024-05-02")
    before = mem.stats(ANA)
    events: list[MemoryEvent] = []
    mem.subscribe(events.append)
    again = mem.add_document(ANA, MANUAL, source="kettle.md", date="2025-01-01")
    assert (again.status, again.passages, again.removed) == ("unchanged", 3, 0)
    assert events == []
    after = mem.stats(ANA)
    assert (after.sessions, after.messages, after.rounds) == (before.sessions, before.messages, before.rounds)
    assert mem.get_session(ANA, again.session_id).started_at.year == 2024  # the first learn's date stays


def test_a_changed_document_replaces_its_passages(mem: Memory) -> None:
    mem.add_document(ANA, MANUAL, source="kettle.md", date="2024-05-02")
    changed = MANUAL.replace("two years", "five years").replace(
        "## Warranty", "## Safety\n\nNever open the lid while it boils.\n\n## Warranty"
    )
    events: list[MemoryEvent] = []
    mem.subscribe(events.append)
    learned = mem.add_document(ANA, changed, source="kettle.md", date="2024-07-01")
    assert (learned.status, learned.removed, learned.passages) == ("replaced", 3, 4)
    assert [e.type for e in events] == ["memory.erased", "session.stored"]
    texts = [h.text for h in mem.search(ANA, "warranty years", k=10)]
    assert any("five years" in t for t in texts) and not any("two years" in t for t in texts)
    stored = mem.get_session(ANA, learned.session_id)
    assert len(stored.messages) == 4 and stored.started_at.month == 7
    assert [s.id for s in mem.sessions(ANA)] == ["chat-1", learned.session_id]  # the chat is untouched
    hit = mem.search(ANA, "open the lid while it boils", k=1)[0]
    assert hit.document is not None and (hit.document.title_path, hit.document.position) == (
        ["Aurora kettle", "Safety"], 2
    )  # fmt: skip


def test_files_are_read_as_markdown_text_or_pdf_under_their_path(mem: Memory, tmp_path: Path) -> None:
    md = tmp_path / "kettle.md"
    md.write_text(MANUAL, encoding="utf-8")
    txt = tmp_path / "notes.txt"
    txt.write_text("# not a heading\nThe spare key is under the blue pot.\n\nWater the basil daily.\n")
    pdf = tmp_path / "toaster.pdf"
    pdf.write_bytes(
        tiny_pdf([["Toaster guide", "Empty the crumb tray weekly."], ["Warranty", "Three years."]])
    )
    results = {p.name: mem.add_document(ANA, p, date="2024-05-03") for p in (md, txt, pdf)}
    assert {n: (r.format, r.passages, r.source) for n, r in results.items()} == {
        "kettle.md": ("markdown", 3, md.as_posix()),
        "notes.txt": ("text", 1, txt.as_posix()),
        "toaster.pdf": ("text", 1, pdf.as_posix()),
    }
    hit = mem.search(ANA, "where is the spare key?", k=1)[0]
    assert (
        hit.document is not None and hit.document.source == txt.as_posix() and hit.document.title_path == []
    )
    pages = mem.get_session(ANA, results["toaster.pdf"].session_id).messages[0].content
    assert "Empty the crumb tray weekly." in pages and "Three years." in pages
    assert mem.add_document(ANA, md, date="2025-01-01").status == "unchanged"  # a file learned again
    named = mem.add_document(ANA, txt, source="household notes", format="markdown")
    assert (named.source, named.format, named.title) == ("household notes", "markdown", "not a heading")


@pytest.mark.parametrize(
    ("make", "where", "words"),
    [
        (lambda d: d / "missing.md", "missing.md", "no such file"),
        (lambda d: d, "", "is a directory"),
        (
            lambda d: _write(d / "photo.png", b"\x89PNG\r\n\x1a\n\x00\x00"),
            "photo.png",
            "unsupported document type",
        ),
        (lambda d: _write(d / "data.txt", b"abc\x00def"), "data.txt", "binary file"),
        (lambda d: _write(d / "latin.txt", "caf\xe9".encode("latin-1")), "latin.txt", "not UTF-8"),
        (lambda d: _write(d / "empty.md", b" \n\n"), "empty.md", "is empty"),
        (lambda d: _write(d / "broken.pdf", b"%PDF-1.4 nothing else"), "broken.pdf", "not a readable PDF"),
        (lambda d: _write(d / "scan.pdf", tiny_pdf([[]])), "scan.pdf", "without text"),
        (
            lambda d: _write(d / "heads.md", b"# Title\n\n## Part\n"),
            "document",
            "no text besides its headings",
        ),
    ],
    ids=[
        "missing",
        "directory",
        "unsupported",
        "binary",
        "not-utf8",
        "empty",
        "broken-pdf",
        "scan",
        "headings",
    ],
)
def test_a_bad_file_is_refused_naming_it_and_nothing_is_stored(
    tmp_path: Path, make: Any, where: str, words: str
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    path = make(folder)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        with pytest.raises(InvalidInput) as caught:
            m.add_document(ANA, path)
        assert words in str(caught.value)
        assert caught.value.where.endswith(where)
        assert m.scopes() == []


def test_bad_text_is_refused_naming_the_argument_and_nothing_is_stored(tmp_path: Path) -> None:
    existing = tmp_path / "kettle.md"
    existing.write_text(MANUAL)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        cases = [
            ({"document": "  \n", "source": "x"}, "document", "must not be blank"),
            ({"document": MANUAL, "source": "a\nb"}, "source", "one line"),
            ({"document": MANUAL, "source": " "}, "source", "must not be blank"),
            ({"document": MANUAL, "source": "x", "format": "pdf"}, "format", "'markdown'"),
            ({"document": str(existing)}, "document", "pass pathlib.Path"),
            ({"document": "x" * 1_000_001, "source": "big"}, "document", "at most 1000000"),
        ]
        for args, where, words in cases:
            with pytest.raises(InvalidInput) as caught:
                m.add_document(ANA, **args)
            assert (caught.value.where, words in str(caught.value)) == (where, True), caught.value
        assert m.scopes() == []


def test_a_text_without_a_source_is_named_by_its_title_and_its_text(mem: Memory) -> None:
    first = mem.add_document(ANA, MANUAL)
    assert first.source.startswith("Aurora kettle [") and len(first.source) == len("Aurora kettle [") + 9
    assert mem.add_document(ANA, MANUAL).status == "unchanged"  # the same text: the same document
    changed = mem.add_document(ANA, MANUAL.replace("two years", "five years"))
    assert changed.status == "added" and changed.source != first.source  # another document, not a replacement
    plain = mem.add_document(ANA, "\n  water the basil daily, it wilts fast\nand more\n")
    assert plain.source.startswith("water the basil daily, it wilts fast [")
    assert len(mem.sessions(ANA)) == 4  # the chat and three documents


def test_a_conversation_under_the_documents_session_id_is_left_alone(mem: Memory) -> None:
    taken = session_id("notes")
    mem.add_session(ANA, [{"role": "user", "content": "my own chat"}], session_id=taken)
    with pytest.raises(InvalidInput, match="holds a conversation, not a document") as caught:
        mem.add_document(ANA, MANUAL, source="notes")
    assert caught.value.where == "source"
    assert [m.content for m in mem.get_session(ANA, taken).messages] == ["my own chat"]


def test_a_pdf_without_pypdf_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = _write(tmp_path / "guide.pdf", tiny_pdf([["Hello"]]))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf now raises ImportError
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        with pytest.raises(NotAvailable, match=r"pip install 'graphrecall\[pdf\]'"):
            m.add_document(ANA, pdf)
        assert m.scopes() == []


def test_learned_documents_survive_a_flush_and_an_export_then_import(mem: Memory) -> None:
    learned = mem.add_document(ANA, MANUAL, source="kettle.md", date="2024-05-02")
    resident = mem.search(ANA, "warranty", k=1)[0]  # a small scope: searched from its write log
    mem.flush()
    flushed = mem.search(ANA, "warranty", k=1)[0]  # now from Kuzu and the derived indexes
    assert resident.document == flushed.document and flushed.document is not None
    bea = Scope(org_id="acme", user_id="bea")
    mem.import_sessions(bea, mem.export_sessions(ANA))
    copied = mem.search(bea, "warranty", k=1)[0]
    assert copied.document == flushed.document and copied.session_id == learned.session_id
    assert mem.add_document(bea, MANUAL, source="kettle.md").status == "unchanged"


def _facts(text: str) -> dict[str, Any]:
    return {"facts": [{"text": text, "kind": "other", "message_ids": ["m2"]}]}


def test_extraction_over_a_document_runs_when_asked_and_follows_its_replacement(tmp_path: Path) -> None:
    sid = session_id("kettle.md")
    llm = ScriptedLLM(ordered=False)
    llm.add(f"Session id: {sid}\n", _facts("The Aurora kettle must be descaled monthly."), times=1)
    with Memory.open(
        tmp_path / "store",
        embedder=HashingEmbedder(64),
        llm=llm,
        extraction=ExtractionConfig(background=False),
    ) as m:
        first = m.add_document(ANA, MANUAL, source="kettle.md", date="2024-05-02", extract=True)
        assert first.extraction is not None and first.extraction.facts_added == 1
        (fact,) = m.facts(ANA)
        assert (fact.text, fact.session_id, fact.message_ids) == (
            "The Aurora kettle must be descaled monthly.", sid, [f"{sid}#1"]
        )  # fmt: skip
        assert "[document]: kettle.md › Aurora kettle › Cleaning Descale" in llm.calls[0].prompt
        again = m.add_document(ANA, MANUAL, source="kettle.md", extract=True)
        assert again.extraction is None  # extracted already
        llm.add(f"Session id: {sid}\n", _facts("The Aurora kettle must be descaled weekly."), times=1)
        changed = m.add_document(
            ANA, MANUAL.replace("every month", "every week"), source="kettle.md", extract=True
        )
        assert changed.status == "replaced" and changed.extraction is not None
        assert [f.text for f in m.facts(ANA, include_superseded=True)] == [
            "The Aurora kettle must be descaled weekly."
        ]  # the old version's fact went with its passages


def test_extraction_is_queued_by_default_and_refused_without_a_model(tmp_path: Path) -> None:
    sid = session_id("kettle.md")
    llm = ScriptedLLM(ordered=False).add(f"Session id: {sid}\n", _facts("The kettle boils fast."))
    with Memory.open(tmp_path / "a", embedder=HashingEmbedder(64), llm=llm) as m:
        queued = m.add_document(ANA, MANUAL, source="kettle.md", extract=True)
        assert queued.extraction_job is not None and queued.extraction_job.session_id == sid
        assert m.wait_for_extraction(timeout=60)
        assert [f.text for f in m.facts(ANA)] == ["The kettle boils fast."]
    with Memory.open(tmp_path / "b", embedder=HashingEmbedder(64)) as m:
        with pytest.raises(NotAvailable):
            m.add_document(ANA, MANUAL, source="kettle.md", extract=True)
        assert m.scopes() == []


async def test_async_memory_learns_a_document(tmp_path: Path) -> None:
    async with AsyncMemory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        learned = await m.add_document(ANA, MANUAL, source="kettle.md")
        hits = await m.search(ANA, "descale vinegar", k=1)
    assert learned.status == "added" and hits[0].document is not None


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
