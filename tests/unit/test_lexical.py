"""User-side BM25 over a candidate pool: rare shared words win, documents without query words are left out."""

from __future__ import annotations

from graphrecall.retrieve.lexical import pool_bm25


def test_the_document_with_the_rarer_query_word_ranks_first() -> None:
    docs = {
        "a": "I adopted a puppy called Biscuit",
        "b": "the puppy training class starts soon",
        "c": "puppy food recommendations for a puppy",
    }
    ranked = pool_bm25("what did I call my puppy Biscuit", docs)
    assert ranked[0][0] == "a"
    assert {d for d, _ in ranked} == {"a", "b", "c"}


def test_documents_without_any_query_word_are_not_returned() -> None:
    ranked = pool_bm25("sourdough starter", {"x": "my sister moved to Lisbon", "y": "feed the starter daily"})
    assert [d for d, _ in ranked] == ["y"]
    assert ranked[0][1] > 0


def test_an_empty_query_or_pool_finds_nothing() -> None:
    assert pool_bm25("the of and", {"x": "the cat"}) == []
    assert pool_bm25("cat", {}) == []


def test_a_word_without_content_matches_nothing() -> None:
    docs = {"flat": "we found a flat to live in near the park", "dog": "Pepper finally sleeps on our bed now"}
    ranked = pool_bm25("where do I live now?", docs)
    assert [d for d, _ in ranked] == ["flat"]
    # the old query kept "now", and in a pool of two the rarer-looking word could outweigh the answer
    assert {d for d, _ in pool_bm25("where do I live now?", docs, drop_query_stopwords=False)} == {
        "flat",
        "dog",
    }
