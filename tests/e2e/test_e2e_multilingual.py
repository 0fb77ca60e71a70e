"""End to end over real HTTP with the real local model on a Russian session: the facts it extracts stay in Russian
(the extraction prompt asks for the user's language), the pet's name is kept as written, and a Russian question
finds a fact. Opt-in (``pytest -m e2e``); it proves the path, not that a 1.5B model is good at Russian."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from tests.e2e.conftest import exchange, local_llm, local_memory

pytestmark = pytest.mark.e2e

SCOPE = ("e2e", "olga")
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def test_a_russian_session_gives_russian_facts_found_by_a_russian_question(
    local_llm_url: str, tmp_path: Path
) -> None:
    llm = local_llm(local_llm_url)
    started = time.monotonic()
    with local_memory(tmp_path / "store", llm) as m:
        added = m.add_session(
            SCOPE,
            exchange(
                "Привет! Я живу в Казани и работаю медсестрой. Мою собаку зовут Шарик.",
                "Приятно познакомиться! Казань — прекрасный город.",
            ),
            session_id="s1",
            date="2024-03-01T10:00:00",
            extract=True,
        )
        facts = m.facts(SCOPE)
        entities = [e.name for e in m.entities(SCOPE)]
        hits = m.search(SCOPE, "где я живу?", 5, kinds=("fact",), question_date="2024-03-02")
    print(f"\nextraction took {time.monotonic() - started:.0f} s: {added.extraction}")
    print("facts:", [f.text for f in facts], "entities:", entities, "hits:", [h.text for h in hits])
    assert added.extraction is not None and added.extraction.sessions_done == 1, added.extraction
    assert facts, "the model extracted nothing"
    assert sum(bool(CYRILLIC.search(f.text)) for f in facts) >= len(facts) / 2, [f.text for f in facts]
    assert not any(name.lower() in ("sharik", "kazan") for name in entities), entities  # not transliterated
    assert hits, "a Russian question found no fact"
