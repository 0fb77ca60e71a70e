"""A document's text into passages: pieces of a few paragraphs, each with the headings above it. Pure: text in, passages
out.

Why passages and not the whole document: retrieval ranks stored rounds, and a question is answered by a paragraph,
not by a manual; a passage is the unit a hit shows and a context packs. Why paragraphs as the boundaries: a
paragraph is where the writer put one point, so a cut there never splits a statement; consecutive paragraphs under
the same heading are packed together up to ``MAX_PASSAGE_CHARS`` (a one-line paragraph, "See below:", is no
passage on its own), and only a paragraph longer than that is cut, at sentence ends (then at line ends, then at a
space). Headings never share a passage with another section: a passage's title path says what all of it is about.

Markdown's structure comes from markdown-it-py (CommonMark: ATX and setext headings, fences that may hold ``#``
lines, lists, quotes): a hand-written reader of ``#`` lines took a shell comment inside a code fence for a heading.
Each block's text is kept as written (its source lines), so code and lists read as in the file. Plain text is
split at blank lines; a form feed (how PDF text comes, one page after another) is a paragraph break too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from markdown_it import MarkdownIt
from markdown_it.token import Token

from graphrecall.models import DocumentFormat

MAX_PASSAGE_CHARS = 800
"""Longest passage, in characters. About one window of the bundled model (256 tokens, ~760 characters), so a
passage's own vector covers all of it; a longer detail inside one is still found by its sentence vectors (a stored
turn over 300 characters also gets those: ``embed.passages``)."""
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+(?=\S)")
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}(?:\s|$)", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n|\f")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*\Z", re.DOTALL)
# Blocks cut at sentence ends when too long; the others (code, lists, tables) at line ends.
_PROSE = frozenset({"paragraph_open", "blockquote_open"})


@dataclass(frozen=True)
class Passage:
    """One piece of a document: its text and the headings above it, outermost first."""

    title_path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class _Block:
    title_path: tuple[str, ...]
    text: str
    prose: bool


@dataclass(frozen=True)
class Split:
    """A document as passages, and its title (its first heading, if it has one)."""

    passages: list[Passage]
    title: str | None


def detect_format(text: str, source: str = "") -> DocumentFormat:
    """``markdown`` or ``text`` by the source's suffix; with none known, Markdown when a line is an ATX heading
    (``# Title``), else plain text (where a ``#`` line or a ``---`` underline would otherwise become a heading)."""
    suffix = PurePosixPath(source.lower()).suffix
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in TEXT_SUFFIXES or suffix == ".pdf":
        return "text"
    return "markdown" if _HEADING_LINE.search(text) else "text"


def split(text: str, fmt: DocumentFormat, max_chars: int = MAX_PASSAGE_CHARS) -> Split:
    """The passages of ``text`` read as ``fmt``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks, title = _markdown_blocks(text) if fmt == "markdown" else (_text_blocks(text), None)
    return Split(_pack(blocks, max_chars), title)


def _text_blocks(text: str) -> list[_Block]:
    return [_Block((), part.strip(), True) for part in _PARAGRAPH_BREAK.split(text) if part.strip()]


def _markdown_blocks(text: str) -> tuple[list[_Block], str | None]:
    """Top-level blocks of a Markdown text with the headings above each, and its first heading."""
    front = _FRONT_MATTER.match(text)
    # YAML front matter: a site generator's settings, not text (and its closing "---" is no heading).
    if front is not None:
        text = "\n" * front.group(0).count("\n") + text[front.end() :]
    lines = text.split("\n")
    tokens = MarkdownIt("commonmark").parse(text)
    headings: list[tuple[int, str]] = []  # (level, text) of the open sections, outermost first
    blocks: list[_Block] = []
    title: str | None = None
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.nesting < 0 or tok.map is None:
            continue
        if tok.type == "heading_open":
            level, name = int(tok.tag[1:]), _plain(tokens[i + 1])
            headings = [h for h in headings if h[0] < level]
            if name:
                headings.append((level, name))
                title = title if title is not None else name
            continue
        body = "\n".join(lines[tok.map[0] : tok.map[1]]).strip()
        if not body or tok.type == "hr" or (tok.type == "html_block" and _COMMENT.match(body)):
            continue
        blocks.append(_Block(tuple(h[1] for h in headings), body, tok.type in _PROSE))
    return blocks, title


def _plain(inline: Token) -> str:
    """A heading's words without its markup (``Kettle *manual*`` -> ``Kettle manual``)."""
    words = [c.content for c in inline.children or [] if c.type in ("text", "code_inline")]
    return " ".join("".join(words).split())


def _pack(blocks: list[_Block], max_chars: int) -> list[Passage]:
    """Consecutive blocks of one section joined into passages of at most ``max_chars``; a longer block is cut."""
    out: list[Passage] = []
    path: tuple[str, ...] | None = None
    current: list[str] = []

    def close() -> None:
        if current and path is not None:
            out.append(Passage(path, "\n\n".join(current)))
        current.clear()

    for block in blocks:
        if block.title_path != path:
            close()
            path = block.title_path
        for piece in _pieces(block.text, block.prose, max_chars):
            if current and sum(len(c) + 2 for c in current) + len(piece) > max_chars:
                close()
            current.append(piece)
    close()
    return out


def _pieces(text: str, prose: bool, max_chars: int) -> list[str]:
    """``text`` whole when it fits, else cut into pieces of at most ``max_chars``: prose at sentence ends first,
    code and lists at line ends first, then the other, then at the last space that fits."""
    if len(text) <= max_chars:
        return [text]
    first, then, joint = (
        (_SENTENCE_END.split, str.splitlines, " ") if prose else (str.splitlines, _SENTENCE_END.split, "\n")
    )
    units: list[str] = []
    for unit in first(text):
        if len(unit) <= max_chars:
            units.append(unit)
            continue
        for sub in then(unit):
            units.extend(_hard_cut(sub, max_chars))
    pieces: list[str] = []
    for unit in (u.strip() for u in units):
        if not unit:
            continue
        if pieces and len(pieces[-1]) + len(joint) + len(unit) <= max_chars:
            pieces[-1] += joint + unit
        else:
            pieces.append(unit)
    return pieces


def _hard_cut(text: str, max_chars: int) -> list[str]:
    """A run with no sentence or line end inside ``max_chars``: cut at the last space that fits (or mid-word)."""
    out = []
    while len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        out.append(text[:cut])
        text = text[cut:].lstrip()
    return [*out, text] if text else out
