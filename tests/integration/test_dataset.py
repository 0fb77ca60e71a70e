"""graphrecall dataset: records from stored memory that cite their sources; deterministic without an LLM, and with
one, generated questions kept only when the model's check finds them supported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, NotAvailable, cli
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ChatMessage, ScriptedLLM

ANN = ("acme", "ann")


def _llm() -> ScriptedLLM:
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", {
        "facts": [{"text": "The user lives in Lisbon.", "kind": "attribute", "message_ids": ["m1"]},
                  {"text": "The user has a cat named Miso.", "kind": "attribute", "message_ids": ["m2"]}],
        "events": [{"subject": "user", "verb": "moved to", "object": "Lisbon", "text": "The user moved to Lisbon.",
                    "time_start": "2024-04-20", "message_ids": ["m1"]}],
        "entities": [{"name": "Miso", "type": "animal"}, {"name": "Lisbon", "type": "place"}],
    })  # fmt: skip
    llm.add("New facts, each followed", _all_new)
    return llm


def _all_new(messages: list[ChatMessage]) -> dict[str, Any]:
    import re

    labels = re.findall(r"^(n\d+): ", messages[-1].content, re.M)
    return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "t"} for n in labels]}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(
        tmp_path / "store",
        embedder=HashingEmbedder(64),
        llm=_llm(),
        extraction=ExtractionConfig(background=False),
    ) as mem:
        mem.add_session(ANN, [
            {"id": "m1", "role": "user", "content": "I moved to Lisbon on April 20th."},
            {"id": "m2", "role": "user", "content": "My cat Miso came with me."},
        ], session_id="s1", date="2024-05-01", extract=True)  # fmt: skip
        old = mem.add_fact(ANN, "The user works at Initech.", kind="attribute").fact
        new = mem.add_fact(ANN, "The user works at Globex.", kind="attribute").fact
        mem.supersede(ANN, old.id, new.id)
        yield mem


def test_qa_without_a_model_asks_dates_and_what_is_still_true(memory: Memory) -> None:
    ds = memory.dataset(ANN, format="qa")
    by_q = {r["question"]: r for r in ds.records}
    assert by_q["When did user moved to Lisbon?"]["answer"] == "2024-04-20"
    assert by_q["Is it still true that the user lives in Lisbon?"]["answer"] == "yes"
    changed = by_q["Is it still true that the user works at Initech?"]
    assert changed["answer"] == "no: The user works at Globex." and changed["kind"] == "fact_changed"
    lisbon = by_q["Is it still true that the user lives in Lisbon?"]["sources"]
    assert lisbon["session_id"] == "s1" and lisbon["message_ids"] == ["m1"]
    assert memory.dataset(ANN, format="qa") == ds  # deterministic


def test_chat_and_graph_records_cite_their_sessions(memory: Memory) -> None:
    [chat] = memory.dataset(ANN, format="chat").records
    assert chat["messages"][0]["content"] == "I moved to Lisbon on April 20th."
    assert {f["text"] for f in chat["facts"]} == {
        "The user lives in Lisbon.",
        "The user has a cat named Miso.",
    }
    assert chat["sources"]["date"].endswith("+00:00")
    [event] = [r for r in memory.dataset(ANN, format="graph").records if r["kind"] == "event"]
    assert (event["subject"], event["predicate"], event["object"]) == ("user", "moved to", "Lisbon")
    assert event["sources"]["session_id"] == "s1"


def test_generated_questions_are_kept_only_when_the_check_supports_them(memory: Memory) -> None:
    llm = ScriptedLLM(ordered=False)
    llm.add("whose answer is this fact", lambda msgs: (
        {"question": "Where do I live?", "answer": "Lisbon"} if "lives in Lisbon" in msgs[-1].content
        else {"question": "What is my dog called?", "answer": "Rex"}))  # fmt: skip
    llm.add("Does what the user said support", lambda msgs: {
        "supported": "Lisbon" in msgs[-1].content.split("Question:")[1], "reason": "t"})  # fmt: skip
    ds = memory.dataset(ANN, format="qa", generate=True, llm=llm)
    assert [(r["question"], r["answer"]) for r in ds.records] == [("Where do I live?", "Lisbon")]
    assert ds.rejected == 1 and ds.llm_calls == 4  # two facts with source words; add_fact's have none
    assert ds.records[0]["sources"]["message_ids"] == ["m1"]


def test_generate_without_a_model_is_refused(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "s", embedder=HashingEmbedder(64)) as mem:
        mem.add_session(ANN, [{"role": "user", "content": "hi"}], session_id="s1")
        with pytest.raises(NotAvailable, match="need an LLM"):
            mem.dataset(ANN, generate=True)


def test_the_cli_writes_json_lines(
    memory: Memory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory.root
    memory.close()
    out = tmp_path / "qa.jsonl"
    args = ["dataset", "--org", "acme", "--user", "ann", "--root", str(root), "--embedder", "hashing"]
    assert cli.main([*args, "--format", "graph", "-o", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all("sources" in r for r in records)
    assert "graph records from acme/ann" in capsys.readouterr().err
    assert cli.main([*args, "--format", "poem"]) == 2
