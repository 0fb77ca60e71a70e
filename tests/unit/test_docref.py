"""How a document passage names its source (``graphrecall.docref``) and the rounds a document's session becomes."""

from __future__ import annotations

from datetime import datetime

from graphrecall import docref
from graphrecall.documents import Passage, as_messages
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import DocumentRef, Role, validate_identifier


def test_a_source_has_one_stable_session_id_that_is_a_valid_id() -> None:
    sid = docref.session_id("docs/install.md")
    assert sid == docref.session_id("docs/install.md") != docref.session_id("docs/Install.md")
    assert sid.startswith("doc-") and len(sid) == 20
    assert validate_identifier(sid, "session_id") == sid


def test_the_location_line_reads_back_even_from_awkward_names() -> None:
    text = docref.passage_text(
        "my\nnotes › 2024.md", ["Install › Linux", "", "  Debian\t12 "], "Run it.\nAgain."
    )
    assert text.split("\n")[0] == "my notes > 2024.md › Install > Linux › Debian 12"
    found = docref.parse_location(f"document: {text}")
    assert found == ("my notes > 2024.md", ["Install > Linux", "Debian 12"], "Run it.\nAgain.")
    assert docref.parse_location("user: document: x › y\nz") is None
    assert DocumentRef.of_round("assistant: hi", 3) is None
    assert DocumentRef.of_round(f"document: {text}", 3) == DocumentRef(
        source="my notes > 2024.md", title_path=["Install > Linux", "Debian 12"], position=3
    )


def test_what_is_indexed_is_the_headings_and_the_text_not_the_source() -> None:
    content = docref.passage_text("/home/ana/tmp/kettle.md", ["Cleaning"], "Descale monthly.")
    assert docref.indexed_text(content) == "Cleaning\nDescale monthly."
    assert docref.indexed_text(docref.passage_text("notes.txt", [], "Plain.")) == "Plain."


def test_each_passage_is_a_round_of_its_own_on_the_user_side() -> None:
    messages = as_messages(
        "/home/ana/kettle.md", [Passage(("Manual",), "Boils fast."), Passage((), "Two years.")]
    )
    assert [m.role for m in messages] == [Role.document, Role.document]
    rows = message_rows("doc-x", messages, start_idx=0, date=datetime(2024, 5, 1))
    rounds = build_rounds("doc-x", rows)
    assert [(r.id, r.user_text, r.reply_text) for r in rounds] == [
        ("doc-x@0", "Manual\nBoils fast.", ""),
        ("doc-x@1", "Two years.", ""),
    ]
    assert rounds[0].text == "document: /home/ana/kettle.md › Manual\nBoils fast."
    terms = rounds[0].terms.split()
    assert "wana" not in terms and "whome" not in terms  # the source's words
    assert DocumentRef.of_round(rounds[1].text, rounds[1].idx) == DocumentRef(
        source="/home/ana/kettle.md", title_path=[], position=1
    )


def test_a_text_without_a_source_is_named_by_its_title_or_first_line_and_its_hash() -> None:
    named = docref.text_source("# Notes\n\nbody", "Notes")
    assert named.startswith("Notes [") and named == docref.text_source("# Notes\n\nbody", "Notes")
    assert named != docref.text_source("# Notes\n\nbody!", "Notes")
    long = docref.text_source("\n\n## " + "word " * 40, None)
    assert (
        long.startswith("word word") and long.split(" [")[0].endswith("…") and len(long.split(" [")[0]) == 60
    )
