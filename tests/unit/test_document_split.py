"""Splitting a document into passages (``graphrecall.documents.split``): headings become title paths, paragraphs
are the cut points, nothing is longer than the limit, and no word is lost or reordered."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from graphrecall.documents.split import MAX_PASSAGE_CHARS, Passage, detect_format, split

MANUAL = """---
title: Front matter is not text
---
# Kettle manual

The Aurora kettle boils a litre in three minutes.

## Install

### Linux

Plug it in.

```bash
# this comment is code, not a heading
make install
```

## Cleaning

<!-- an editor's note -->
Descale every month.

Rinse twice.

Warranty
--------

Two years.
"""


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def test_headings_become_title_paths_and_sections_never_share_a_passage() -> None:
    found = split(MANUAL, "markdown")
    assert found.title == "Kettle manual"
    assert [p.title_path for p in found.passages] == [
        ("Kettle manual",),
        ("Kettle manual", "Install", "Linux"),
        ("Kettle manual", "Cleaning"),
        ("Kettle manual", "Warranty"),  # a setext heading, one level below the title
    ]
    linux = found.passages[1].text
    assert "# this comment is code, not a heading" in linux and linux.startswith("Plug it in.")
    assert found.passages[2].text == "Descale every month.\n\nRinse twice."  # packed; the comment left out
    assert "Front matter" not in " ".join(p.text for p in found.passages)


def test_a_heading_closes_the_deeper_ones_and_keeps_the_shallower() -> None:
    text = "# A\n\n## B\n\n### C\n\nc\n\n## D\n\nd\n\n#### E\n\ne\n\n# F\n\nf\n"
    assert [(p.title_path, p.text) for p in split(text, "markdown").passages] == [
        (("A", "B", "C"), "c"),
        (("A", "D"), "d"),
        (("A", "D", "E"), "e"),
        (("F",), "f"),
    ]


def test_heading_markup_is_dropped_from_the_path() -> None:
    found = split("# The *Aurora* `kettle`\n\ntext\n", "markdown")
    assert found.passages == [Passage(("The Aurora kettle",), "text")]


def test_a_long_paragraph_is_cut_at_sentence_ends_and_nothing_is_lost() -> None:
    sentences = [f"Sentence number {i} says something about the kettle and its lid." for i in range(60)]
    text = "# Long\n\n" + " ".join(sentences) + "\n"
    found = split(text, "markdown", max_chars=300)
    assert len(found.passages) > 5
    assert all(len(p.text) <= 300 for p in found.passages)
    assert all(p.text.endswith("lid.") for p in found.passages)  # never mid-sentence
    assert words(" ".join(p.text for p in found.passages)) == words(" ".join(sentences))


def test_a_long_list_is_cut_at_line_ends_and_one_endless_word_is_cut_anyway() -> None:
    items = "\n".join(f"- item {i} of the packing list" for i in range(80))
    found = split(f"# List\n\n{items}\n\n{'x' * 700}\n", "markdown", max_chars=200)
    assert all(len(p.text) <= 200 for p in found.passages)
    assert all(p.text.startswith(("- item", "x")) for p in found.passages)
    assert "".join(p.text for p in found.passages if p.text.startswith("x")) == "x" * 700


def test_plain_text_splits_at_blank_lines_and_form_feeds_and_has_no_headings() -> None:
    text = "# not a heading\nsecond line\n\n\n  next paragraph\n\fpage two\n"
    found = split(text, "text", max_chars=30)
    assert found.title is None
    # 27 characters: the next paragraph does not fit beside them; a form feed (a PDF's next page) is a break too.
    assert found.passages == [
        Passage((), "# not a heading\nsecond line"),
        Passage((), "next paragraph\n\npage two"),
    ]
    assert [p.text for p in split(text, "text").passages] == [
        "# not a heading\nsecond line\n\nnext paragraph\n\npage two"
    ]


def test_a_document_of_headings_alone_has_no_passage() -> None:
    assert split("# Title\n\n## Section\n", "markdown").passages == []
    assert split("\n \n\f\n", "text").passages == []


def test_windows_line_ends_read_like_unix_ones() -> None:
    assert split("# A\r\n\r\none\r\n\r\ntwo\r\n", "markdown").passages == [Passage(("A",), "one\n\ntwo")]


def test_the_format_comes_from_the_suffix_then_from_headings() -> None:
    assert detect_format("plain", "notes.md") == "markdown"
    assert detect_format("# heading", "notes.txt") == "text"
    assert detect_format("# heading", "report.pdf") == "text"
    assert detect_format("intro\n\n## Install\n", "https://example.org/guide") == "markdown"
    assert detect_format("no headings here\n#hashtag is not one", "label") == "text"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400),
            st.sampled_from(["\n\n", "\n", "# H\n", "## Sub\n", "```\n", "- item\n", ". ", "\f"]),
        ),
        max_size=30,
    ),
    st.sampled_from(["markdown", "text"]),
    st.integers(min_value=40, max_value=900),
)
def test_no_passage_is_longer_than_the_limit_and_no_word_moves(
    parts: list[str], fmt: str, max_chars: int
) -> None:
    text = "".join(parts)
    found = split(text, fmt, max_chars=max_chars)  # type: ignore[arg-type]
    assert all(0 < len(p.text) <= max_chars for p in found.passages)
    if fmt == "text":  # every word of a plain text is in a passage, in order (Markdown drops its markup)
        assert words(" ".join(p.text for p in found.passages)) == words(text)


def test_the_default_limit_is_about_one_model_window() -> None:
    assert 600 <= MAX_PASSAGE_CHARS <= 1000
