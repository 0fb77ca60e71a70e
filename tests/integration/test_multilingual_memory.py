"""Memory in Russian and Chinese, extracted by a scripted model: facts stay in the language they were said in,
names as written, relative dates in that language resolve against the session date, and a question in the same
language finds the fact and the round (Russian inflections and Chinese without spaces meet through the text layer).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.prompts import load_prompt

EXTRACT = "Extract four lists"


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM(ordered=False)


@pytest.fixture
def memory(tmp_path: Path, llm: ScriptedLLM) -> Iterator[Memory]:
    cfg = ExtractionConfig(background=False)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(256), llm=llm, extraction=cfg) as m:
        yield m


def extracted(facts: list[dict[str, Any]], entities: list[dict[str, Any]]) -> dict[str, Any]:
    return {"facts": facts, "events": [], "entities": entities, "relations": []}


def test_the_extraction_prompt_asks_for_the_users_language_and_names_as_written() -> None:
    text = " ".join(load_prompt("extract_session").template.split())
    assert "in the language the user wrote in" in text and "never translated or transliterated" in text


@pytest.mark.parametrize(
    ("scope", "said", "fact", "when", "name", "question", "month"),
    [
        (
            ("acme", "olga"),
            "В прошлом месяце я переехала из Казани в Москву. Мою кошку зовут Мурка.",
            "Пользователь живёт в Москве.",
            "в прошлом месяце",
            "Мурка",
            "где я сейчас живу?",
            2,
        ),
        (
            ("acme", "li"),
            "上个月我搬到了上海。我的猫叫小白。",
            "用户住在上海。",
            "上个月",
            "小白",
            "我现在住在哪里？",
            2,
        ),
    ],
)
def test_facts_stay_in_their_language_and_are_found_in_it(
    memory: Memory,
    llm: ScriptedLLM,
    scope: tuple[str, str],
    said: str,
    fact: str,
    when: str,
    name: str,
    question: str,
    month: int,
) -> None:
    llm.add(
        EXTRACT,
        extracted(
            [{"text": fact, "kind": "attribute", "when": when, "message_ids": ["m1"], "about": []}],
            [{"name": name, "type": "pet", "aliases": []}],
        ),
    )
    memory.add_session(
        scope, [{"role": "user", "content": said}, {"role": "assistant", "content": "👍"}], session_id="s1",
        date="2024-03-10T12:00:00", extract=True,
    )  # fmt: skip
    [stored] = memory.facts(scope)
    assert stored.text == fact  # not translated
    language = "Russian" if scope[1] == "olga" else "Chinese"
    [asked] = [c for c in llm.calls if EXTRACT in c.messages[-1].content]
    assert f"written in {language}" in asked.messages[-1].content  # the prompt names the language to keep
    assert stored.valid_from is not None and stored.valid_from.month == month  # "last month" of March 2024
    assert [e.name for e in memory.entities(scope)] == [name]  # as written
    hits = memory.search(scope, question, 3, kinds=("round", "fact"), question_date="2024-03-11")
    assert {h.kind for h in hits} == {"round", "fact"}
    assert next(h for h in hits if h.kind == "fact").text == fact
