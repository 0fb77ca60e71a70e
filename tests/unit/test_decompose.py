"""Rule-based decomposition of compound questions, and RRF fusion of the sub-questions' hit lists."""

from __future__ import annotations

from datetime import datetime

import pytest

from graphrecall.models import Hit
from graphrecall.read.decompose import decompose
from graphrecall.read.gather import fuse


@pytest.mark.parametrize(
    ("question", "kind", "parts"),
    [
        (
            "How many days passed between the day I cancelled my FarmFresh subscription and the day I did my "
            "online grocery shopping from Instacart?",
            "between",
            ["I cancelled my FarmFresh subscription", "I did my online grocery shopping from Instacart"],
        ),
        (
            "How many months passed between the completion of my undergraduate degree and the submission of "
            "my master's thesis?",
            "between",
            ["the completion of my undergraduate degree", "the submission of my master's thesis"],
        ),
        (
            "Which book did I finish reading first, 'The Hate U Give' or 'The Nightingale'?",
            "order",
            ["I finish reading The Hate U Give", "I finish reading The Nightingale"],
        ),
        (
            "Which device did I set up first, the smart thermostat or the new router?",
            "order",
            ["I set up smart thermostat", "I set up new router"],
        ),
        (
            "How many days before I bought my iPad did I attend the Holiday Market?",
            "gap",
            ["I bought my iPad", "I attend the Holiday Market"],
        ),
        (
            "How many days did it take for me to find a house I loved after starting to work with Rachel?",
            "gap",
            ["starting to work with Rachel", "find a house I loved"],
        ),
        ("What is the total cost of Lola's vet visit and flea medication?", "sum",
         ["cost of Lola's vet visit", "cost of flea medication"]),
        ("How much did I spend on the concert tickets and the hotel combined?", "sum",
         ["spend on concert tickets", "spend on hotel"]),
    ],
)  # fmt: skip
def test_compound_questions_split_into_their_parts(question: str, kind: str, parts: list[str]) -> None:
    d = decompose(question)
    assert (d.kind, d.sub_questions) == (kind, parts)
    assert d.compound


@pytest.mark.parametrize(
    "question",
    [
        "What is my dog's name?",
        "How many hours have I spent playing games in total?",
        "Where did I go between meetings?",  # "between X and Y" needs both parts
        "Which is better, tea or tea?",
    ],
)
def test_simple_questions_are_left_whole(question: str) -> None:
    d = decompose(question)
    assert d.kind == "none" and d.sub_questions == [] and not d.compound


def _hit(i: str) -> Hit:
    return Hit(id=i, text=i, score=1.0, session_id="s", date=datetime(2024, 1, 1))


def test_fusion_rewards_items_found_by_several_queries() -> None:
    whole = [_hit("a"), _hit("b"), _hit("c")]
    part1 = [_hit("x"), _hit("c")]
    part2 = [_hit("c"), _hit("y")]
    fused = fuse([whole, part1, part2], k=10)
    assert fused[0].id == "c"
    assert {h.id for h in fused} == {"a", "b", "c", "x", "y"}
    assert [h.rank for h in fused] == list(range(1, 6))
    assert fuse([whole, part1], k=2)[1].rank == 2 and len(fuse([whole, part1], k=2)) == 2


def test_a_single_list_is_kept_in_order() -> None:
    whole = [_hit("a"), _hit("b"), _hit("c")]
    assert [h.id for h in fuse([whole], k=2)] == ["a", "b"]
