"""``RetrievalConfig.weights``: one documented default per list, a partial dict changes only the lists it names, an
unknown name is refused naming the lists that exist."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from graphrecall.config import DEFAULT_WEIGHTS, OWN_KNOB, ListName, RetrievalConfig
from graphrecall.retrieve.lists import GENERATORS, SMALL_SCOPE_LISTS


def test_the_defaults_are_the_weights_the_lists_were_tuned_with() -> None:
    # The weights every benchmark in docs/benchmarks.md was measured with; changing one is a ranking change.
    assert RetrievalConfig().weights == {
        "vector": 1.0,
        "bm25": 0.7,
        "bm25_user": 1.0,
        "fact": 1.0,
        "event": 0.5,
        "entity": 0.5,
    }


def test_a_partial_dict_changes_only_the_list_it_names() -> None:
    """Before, a list left out weighed 1.0 in fusion, except the user-side list, which was not computed: so
    ``{"bm25": 0.5}`` also dropped bm25_user and doubled event and entity."""
    assert RetrievalConfig(weights={"bm25": 0.5}).weights == {**RetrievalConfig().weights, "bm25": 0.5}


@given(st.dictionaries(st.sampled_from(sorted(DEFAULT_WEIGHTS)), st.floats(min_value=0, max_value=5)))
def test_every_list_has_a_weight_and_only_the_named_ones_differ_from_their_default(
    named: dict[str, float],
) -> None:
    weights = RetrievalConfig(weights=named).weights
    assert set(weights) == set(DEFAULT_WEIGHTS)
    assert {name: w for name, w in weights.items() if name not in named} == {
        name: w for name, w in DEFAULT_WEIGHTS.items() if name not in named
    }
    assert {name: weights[name] for name in named} == named


def test_an_unknown_list_is_refused_naming_it_and_the_lists_that_exist() -> None:
    with pytest.raises(ValidationError) as e:
        RetrievalConfig(weights={"bm25": 0.5, "bm_25_user": 1.0})
    message = str(e.value)
    assert "'bm_25_user'" in message
    assert all(name in message for name in DEFAULT_WEIGHTS)


@pytest.mark.parametrize("name", sorted(OWN_KNOB))
def test_a_list_with_a_knob_of_its_own_is_refused_pointing_at_it(name: str) -> None:
    with pytest.raises(ValidationError, match=OWN_KNOB[name]):
        RetrievalConfig(weights={name: 1.0})


def test_a_dumped_config_validates_back_to_itself() -> None:
    """Benchmarks build variants as ``base.model_dump() | overrides``."""
    cfg = RetrievalConfig(weights={"fact": 0.0}, recency_weight=2.0)
    assert RetrievalConfig.model_validate(cfg.model_dump()) == cfg


def test_every_list_has_one_weight_and_one_generator() -> None:
    cfg = RetrievalConfig(
        weights={"vector": 0.9}, recency_weight=2.0, in_range_weight=0.25, other_language_weight=1.5
    )
    assert {name: cfg.weight(name) for name in ListName} == {
        **{ListName(name): w for name, w in cfg.weights.items()},
        ListName.bm25_tail: cfg.weights["bm25"],  # the same signal as bm25, over rounds not yet in Kuzu
        ListName.recency: 2.0,
        ListName.in_range: 0.25,
        ListName.other_language: 1.5,
    }
    produced = [name for g in GENERATORS for name in g.produces]
    assert sorted(produced) == sorted(ListName)


def test_small_scopes_scale_the_lexical_and_the_extracted_memory_lists() -> None:
    assert {
        ListName.bm25,
        ListName.bm25_tail,
        ListName.bm25_user,
        ListName.fact,
        ListName.event,
        ListName.entity,
        ListName.other_language,  # the lexical lists' vote for rounds they cannot reach: scaled as they are
    } == SMALL_SCOPE_LISTS
