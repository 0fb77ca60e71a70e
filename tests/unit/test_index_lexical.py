"""TantivyLexicalIndex: BM25 over our terms, natural-language-safe queries, durable writes, damage detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall.index import IndexCorrupt, TantivyLexicalIndex
from graphrecall.text import index_terms, query_terms

pytest.importorskip("tantivy")

DOCS = {
    "d1": "I adopted a cat named Tom last year.",
    "d2": "We're running late: the meeting moved to 3.5pm.",
    "d3": 'He said "C++ is hard"; I said no.',
    "d4": "Tom and his cat Tom: a cat's life.",
}


def _idx(path: Path) -> TantivyLexicalIndex:
    return TantivyLexicalIndex.rebuild_from(path, [(k, index_terms(v)) for k, v in DOCS.items()], mark="m1")


def _ids(idx: TantivyLexicalIndex, question: str, k: int = 10) -> list[str]:
    return [i for i, _ in idx.search(query_terms(question).split(), k)]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("adopting cats?", {"d1", "d4"}),  # stemming on both sides
        ("meetings running (late) OR something-unknown-xyz", {"d2"}),  # OR semantics, punctuation
        ('what\'s "c++" hard: field:value AND NOT', {"d3"}),  # query-parser syntax is just text
        ("3.5pm", {"d2"}),  # numbers are terms too
    ],
)
def test_natural_language_questions_match_by_our_terms(
    tmp_path: Path, question: str, expected: set[str]
) -> None:
    assert set(_ids(_idx(tmp_path / "x"), question)) == expected


def test_stopword_only_and_empty_questions_return_nothing(tmp_path: Path) -> None:
    idx = _idx(tmp_path / "x")
    assert _ids(idx, "what is it?") == [] and _ids(idx, "") == []


def test_bm25_ranks_the_document_with_more_matches_first(tmp_path: Path) -> None:
    assert _ids(_idx(tmp_path / "x"), "Tom cat")[0] == "d4"


def test_writes_are_durable_replace_by_id_and_delete(tmp_path: Path) -> None:
    idx = _idx(tmp_path / "x")
    idx.add([("d2", index_terms("a walk in the park")), ("d5", index_terms("parking downtown"))], mark="m2")
    assert set(_ids(idx, "park")) == {"d2", "d5"}
    idx.delete(["d1"], mark="m3")
    idx.close()
    again = TantivyLexicalIndex(tmp_path / "x")
    assert again.count() == 4 and again.mark == "m3"
    assert _ids(again, "meeting") == [] and "d1" not in _ids(again, "adopted cat")


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / "manifest.json").unlink(),
        lambda d: (d / "data" / "meta.json").write_text("{broken"),
        lambda d: [p.unlink() for p in (d / "data").iterdir()],
    ],
    ids=["no-manifest", "bad-meta", "no-data"],
)
def test_damage_is_reported_as_corrupt(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    _idx(tmp_path / "x").close()
    damage(tmp_path / "x")
    with pytest.raises(IndexCorrupt):
        TantivyLexicalIndex(tmp_path / "x")
