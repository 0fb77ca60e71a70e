"""The command-line types shared by the benchmarks (``benchmarks/arguments.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from benchmarks.arguments import token_budgets


def test_budgets_are_distinct_and_ascending() -> None:
    assert token_budgets("4000,2000, 4000,") == [2000, 4000]


def test_an_empty_list_means_no_budgets() -> None:
    assert token_budgets("") == []


@pytest.mark.parametrize("text", ["2000,lots", "0,2000", "-5"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--context-budgets"):
        token_budgets(text)


def test_both_retrieval_benchmarks_parse_budgets_with_it() -> None:
    """One parser for one option: the LongMemEval and LoCoMo command lines reject the same bad value."""
    from benchmarks.locomo.retrieval import _parser as locomo_parser
    from benchmarks.longmemeval.retrieval import _parser as lme_parser

    for parser in (lme_parser(), locomo_parser()):
        args = parser.parse_args(["--data", __file__, "--context-budgets", "4000,1000"])
        assert args.context_budgets == [1000, 4000]
        with pytest.raises(SystemExit) as e:
            parser.parse_args(["--data", __file__, "--context-budgets", "0"])
        assert e.value.code == 2


def test_every_retrieval_benchmark_takes_an_embedder_spec(tmp_path: Path) -> None:
    import argparse

    from benchmarks.arguments import add_embedder, build_embedder, embedder_spec

    from graphrecall.embed import CachedEmbedder, HashingEmbedder

    p = argparse.ArgumentParser()
    add_embedder(p)
    assert p.parse_args(["--embedder", "e5-small"]).embedder == "e5-small"
    assert embedder_spec("default") == embedder_spec(None)  # the configured one, else minilm
    hashing = build_embedder("hashing", tmp_path / "cache.sqlite")
    assert isinstance(hashing, HashingEmbedder) and hashing.dim == 64  # never cached: nothing to save
    assert build_embedder("hashing:32", None).dim == 32
    cached = build_embedder("minilm", tmp_path / "cache.sqlite")  # built lazily: no weights loaded here
    assert isinstance(cached, CachedEmbedder) and "MiniLM" in cached.id
    cached.close()
