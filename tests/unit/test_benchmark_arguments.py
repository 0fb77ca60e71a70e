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


PARSERS = (
    "benchmarks.smallstore.run:_parser",
    "benchmarks.multilingual.run:_parser",
    "benchmarks.longmemeval.retrieval:_parser",
    "benchmarks.longmemeval.latency:_parser",
    "benchmarks.longmemeval.packing:_parser",
    "benchmarks.locomo.retrieval:_parser",
    "benchmarks.perf.run:parse_args",
)


def _parse(where: str, *extra: str) -> argparse.Namespace:
    import importlib

    module, name = where.split(":")
    make = getattr(importlib.import_module(module), name)
    argv = ["--data", __file__, *extra] if "longmemeval" in module or "locomo" in module else list(extra)
    if module.endswith("packing"):
        argv += ["--out", "unused"]
    return make(argv) if name == "parse_args" else make().parse_args(argv)


@pytest.mark.parametrize("where", PARSERS)
def test_every_retrieval_and_speed_benchmark_takes_an_embedder_spec(where: str) -> None:
    """One option, one parser: minilm by default (whatever GRAPHRECALL_EMBEDDER says), any spec of
    embed.spec, hashing included; anything else is a usage error before a model is loaded."""
    assert _parse(where).embedder == "minilm"
    assert _parse(where, "--embedder", "e5-small").embedder == "e5-small"
    assert _parse(where, "--embedder", "hashing:384").embedder == "hashing:384"
    with pytest.raises(SystemExit) as e:
        _parse(where, "--embedder", "bert")
    assert e.value.code == 2


def test_the_default_does_not_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_EMBEDDER", "e5-small")
    assert _parse("benchmarks.smallstore.run:_parser").embedder == "minilm"


def test_a_model_is_cached_in_the_file_and_hashing_is_not(tmp_path: Path) -> None:
    from benchmarks.arguments import build_embedder

    from graphrecall.embed import CachedEmbedder, HashingEmbedder

    hashing = build_embedder("hashing:32", tmp_path / "cache.sqlite")
    assert isinstance(hashing, HashingEmbedder) and hashing.id == "hashing-32"
    e5 = build_embedder("e5-small", tmp_path / "cache.sqlite")  # nothing is loaded before the first embed
    minilm = build_embedder("minilm", tmp_path / "cache.sqlite")
    assert isinstance(e5, CachedEmbedder) and isinstance(minilm, CachedEmbedder)
    # one cache file, two models: their keys differ (embed.cache.cache_key holds the model's id)
    assert e5.id != minilm.id and e5._key("hello", "document") != minilm._key("hello", "document")
    e5.close()
    minilm.close()
