"""The multilingual test set and its benchmark: the data is what its README promises, a broken file is refused
with the file and the item named, and the groups are the ones reported (the run itself:
``tests/integration/test_multilingual_benchmark_run.py``)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from benchmarks.multilingual import data
from benchmarks.multilingual.run import groups, summarize

CJK = "\u4e00-\u9fff"


@pytest.fixture(scope="module")
def histories() -> list[tuple[str, data.History]]:
    return data.load_splits(data.SPLITS)


@pytest.fixture
def raw_dev() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((data.DATA_DIR / "dev.json").read_text(encoding="utf-8"))
    return raw


def _write(tmp_path: Path, raw: dict[str, Any], split: str = "dev") -> None:
    (tmp_path / f"{split}.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")


def test_the_set_is_big_enough_in_enough_languages_and_split_by_history(
    histories: list[tuple[str, data.History]],
) -> None:
    every = [h for _, h in histories]
    questions = [q for h in every for q in h.questions]
    assert len(every) >= 20 and len(questions) >= 120
    assert all(5 <= len(h.sessions) <= 12 for h in every)
    single = {h.language for h in every if "+" not in h.language}
    assert {"ru", "zh"} <= single and len(single) >= 5
    assert any(data.languages(h.language) == {"en", "ru"} for h in every)
    by_split = {split: {h.id for s, h in histories if s == split} for split in data.SPLITS}
    assert by_split["dev"] and by_split["test"] and by_split["dev"].isdisjoint(by_split["test"])
    for key in ("changed", "relative_date", "cross_lingual"):
        assert sum(getattr(q, key) for q in questions) >= 20, key
    # every history language is in both halves, so each half can be reported per language
    langs = {split: {h.language for s, h in histories if s == split} for split in data.SPLITS}
    assert langs["dev"] == langs["test"]


def test_cross_lingual_questions_go_both_ways_and_reach_chinese(
    histories: list[tuple[str, data.History]],
) -> None:
    pairs: Counter[tuple[str, str]] = Counter()
    for _, h in histories:
        for q in (q for q in h.questions if q.cross_lingual):
            pairs[(q.language, h.session_language(q.gold[0]))] += 1
    assert pairs[("en", "ru")] >= 3 and pairs[("ru", "en")] >= 3
    assert pairs[("en", "zh")] >= 2 and pairs[("zh", "en")] >= 2


def test_every_history_is_a_chat_and_never_hands_its_labels_to_the_store(
    histories: list[tuple[str, data.History]],
) -> None:
    for _, h in histories:
        sent = json.dumps(h.session_inputs(), ensure_ascii=False)
        assert all(q.question not in sent for q in h.questions), h.id
        assert "language" not in sent and "cross_lingual" not in sent, h.id
        for s in h.sessions:
            assert [m.role for m in s.messages] == ["user", "assistant"] * (len(s.messages) // 2), (
                s.session_id
            )
        rounds = h.rounds()
        assert {sid for _, sid, _ in rounds} == {s.session_id for s in h.sessions}
        for q in h.questions:  # the answering round is a real round of the first gold session
            assert f"{q.gold[0]}@{q.gold_round}" in {rid for rid, _, _ in rounds}, q.id


def test_changed_answers_are_gold_after_the_first_session_and_chinese_has_no_spaces(
    histories: list[tuple[str, data.History]],
) -> None:
    spaced = re.compile(f"[{CJK}] +[{CJK}]")
    for _, h in histories:
        order = [s.session_id for s in h.sessions]
        for q in (q for q in h.questions if q.changed):
            assert max(order.index(g) for g in q.gold) > 0, q.id
        for s in h.sessions:
            for m in s.messages:
                assert not spaced.search(m.content), s.session_id
        for q in h.questions:
            assert not spaced.search(q.question), q.id


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda r: r["histories"][0]["questions"][1].update(gold=["m01-s99"]),
            r"dev\.json: history m01.*m01-q2.*m01-s99",
        ),
        (
            lambda r: r["histories"][0]["questions"][2].pop("relative_date"),
            r"dev\.json: history m01: question m01-q3: relative_date: Field required",
        ),
        (
            lambda r: r["histories"][1]["questions"][0].update(gold_round=5),
            r"dev\.json: history m02: .*m02-q1: gold_round 5 but m02-s05 has 1 round",
        ),
        (
            lambda r: r["histories"][0]["questions"][5].update(cross_lingual=False),
            r"history m01: .*m01-q6: cross_lingual is False but it is asked in 'en' and m01-s02 is in 'ru'",
        ),
        (
            lambda r: r["histories"][9]["sessions"][1].pop("language"),
            r"history m10: .*session m10-s02: a session of a mixed history needs its language",
        ),
        (
            lambda r: r["histories"][1]["questions"][0].update(id="m01-q1"),
            r"dev\.json: question ids \['m01-q1'\] are used more than once",
        ),
        (lambda r: r["histories"][1].update(id="m01"), r"dev\.json: history ids \['m01'\]"),
        (
            lambda r: r["histories"][2]["sessions"][0].update(bogus=1),
            r"history m03: session m03-s01: bogus: Extra inputs",
        ),
        (
            lambda r: r["histories"][3]["sessions"].__delitem__(slice(4, None)),
            r"history m04: sessions: List should have at least 5",
        ),
    ],
)
def test_a_broken_file_is_refused_naming_the_file_and_the_item(
    tmp_path: Path, raw_dev: dict[str, Any], edit: Any, message: str
) -> None:
    edit(raw_dev)
    _write(tmp_path, raw_dev)
    with pytest.raises(data.DataError, match=message):
        data.load("dev", tmp_path)


def test_a_history_in_both_halves_and_a_wrong_split_name_are_refused(
    tmp_path: Path, raw_dev: dict[str, Any]
) -> None:
    test = copy.deepcopy(raw_dev)
    test["split"] = "test"
    test["histories"] = test["histories"][:1]
    _write(tmp_path, raw_dev)
    _write(tmp_path, test, "test")
    with pytest.raises(data.DataError, match=r"history m01 is in both dev\.json and test\.json"):
        data.load_splits(data.SPLITS, tmp_path)
    with pytest.raises(data.DataError, match="says it is the 'test' split"):
        _write(tmp_path, test, "dev")
        data.load("dev", tmp_path)
    with pytest.raises(ValueError, match="unknown split"):
        data.load("train")


def _row(lang: str, split: str, hit: bool, **flags: bool) -> dict[str, Any]:
    s = {"r@1": float(hit), "r@3": 1.0, "mrr": 1.0 if hit else 0.5}
    labels = {"changed": False, "relative_date": False, "cross_lingual": False} | flags
    return {"history_language": lang, "split": split, "scores": {"graphrecall": s}} | labels


def test_groups_are_all_then_languages_in_the_readme_order_then_the_kinds_of_question() -> None:
    rows = [
        _row("zh", "dev", True),
        _row("en+ru", "dev", False, cross_lingual=True, changed=True),
        _row("ru", "test", True, relative_date=True),
        _row("xx", "test", False),
    ]
    got = groups(rows)
    assert list(got) == [
        "all",
        "ru",
        "zh",
        "en+ru",
        "xx",
        "cross-lingual",
        "same language",
        "changed fact",
        "relative date",
    ]
    assert [len(got[g]) for g in ("cross-lingual", "same language", "changed fact", "relative date")] == [
        1,
        3,
        1,
        1,
    ]
    summary = summarize(rows, ["graphrecall"])
    assert list(summary) == ["both", "dev", "test"]
    assert summary["both"]["all"]["graphrecall"] == {"r@1": 0.5, "r@3": 1.0, "mrr": 0.75, "n": 4}
    assert summary["dev"]["zh"]["graphrecall"]["r@1"] == 1.0
    assert "ru" not in summary["dev"]
    assert list(summarize(rows[:2], ["graphrecall"])) == ["dev"]  # one half: no "both" repeating it
