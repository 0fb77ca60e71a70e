"""The multilingual benchmark end to end on one small mixed-language history with the hashing embedder: it ingests,
asks, scores and writes reports that record the command, the embedder and the commit (seconds, no model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.multilingual.run import main


def session(session_id: str, date: str, language: str, user: str, reply: str) -> dict[str, object]:
    """A one-exchange session in the benchmark's file format."""
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return {"session_id": session_id, "date": date, "language": language, "messages": messages}


SMALL = {
    "id": "x01",
    "language": "en+ru",
    "sessions": [
        session("x01-s01", "2024-03-01T10:00:00", "ru", "Моего кота зовут Персик, он рыжий", "Отличное имя для рыжего кота!"),
        session("x01-s02", "2024-03-09T10:00:00", "en", "I started pottery classes on Tuesdays", "Wheel throwing takes patience, enjoy it."),
        session("x01-s03", "2024-03-20T10:00:00", "ru", "Переехала в Казань, живу у набережной", "Поздравляю с переездом!"),
        session("x01-s04", "2024-04-02T10:00:00", "en", "my sourdough starter smells like nail polish", "That is acetone from hunger: feed it twice a day."),
        session("x01-s05", "2024-04-15T10:00:00", "en+ru", "pottery teacher quit, новая учительница Вера", "A new teacher brings new techniques."),
    ],
    "questions": [
        {"id": "x01-q1", "question": "как зовут кота Персик?", "language": "ru", "gold": ["x01-s01"],
         "gold_round": 0, "changed": False, "relative_date": False, "cross_lingual": False},
        {"id": "x01-q2", "question": "what does my sourdough starter smell like?", "language": "en",
         "gold": ["x01-s04"], "gold_round": 0, "changed": False, "relative_date": False, "cross_lingual": False},
        {"id": "x01-q3", "question": "where did I move last month?", "language": "en", "gold": ["x01-s03"],
         "gold_round": 0, "changed": True, "relative_date": True, "cross_lingual": True},
    ],
}  # fmt: skip


def test_the_benchmark_runs_end_to_end_on_one_small_history(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps({"split": "dev", "histories": [SMALL]}), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--embedder", "hashing", "--split", "dev", "--data-dir", str(tmp_path), "--out", str(out)]
    assert main([*argv, "--embed-cache", str(tmp_path / "cache.sqlite")]) == 0
    report = json.loads((out / "multilingual.json").read_text(encoding="utf-8"))
    config = report["config"]
    assert config["embedder"] == "hashing" and config["embedder_id"].startswith("hashing")
    assert config["command"].startswith("python -m benchmarks.multilingual.run --embedder hashing")
    commit = report["run"]["code"]["commit"] or "unknown"
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", commit) and report["run"]["started"][:2] == "20"
    assert config["histories"] == ["x01"] and config["systems"] == ["graphrecall", "bm25", "dense"]
    rows = {r["id"]: r for r in report["questions"]}
    assert set(rows) == {"x01-q1", "x01-q2", "x01-q3"}
    # words only the gold round has ("Персик", "sourdough"): plain BM25 ranks it first
    assert rows["x01-q1"]["scores"]["bm25"]["r@1"] == 1.0
    assert rows["x01-q2"]["scores"]["bm25"]["r@1"] == 1.0
    assert rows["x01-q2"]["top_sessions"]["bm25"][0] == "x01-s04"
    for r in rows.values():
        for system, s in r["scores"].items():
            assert s["r@1"] <= s["r@3"] and 0.0 <= s["mrr"] <= 1.0, (r["id"], system)
    summary = report["summary"]
    assert list(summary) == ["dev"]
    assert summary["dev"]["all"]["bm25"]["n"] == 3 and summary["dev"]["en+ru"]["dense"]["n"] == 3
    assert summary["dev"]["cross-lingual"]["graphrecall"]["n"] == 1
    md = (out / "multilingual.md").read_text(encoding="utf-8")
    assert "--embedder hashing" in md and commit[:12] in md and "| en+ru | 3 |" in md
    misses = [r["id"] for r in rows.values() if r["scores"]["graphrecall"]["r@1"] < 1]
    assert all(m in md for m in misses)


def test_a_variant_is_ranked_beside_the_library_defaults(tmp_path: Path) -> None:
    """``--variant NAME=JSON``: settings chosen on one half are reported on the other, over the same scope."""
    (tmp_path / "dev.json").write_text(json.dumps({"split": "dev", "histories": [SMALL]}), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--embedder", "hashing", "--split", "dev", "--data-dir", str(tmp_path), "--out", str(out)]
    variant = '{"newer_restatements": "off"}'
    assert main([*argv, "--embed-cache", str(tmp_path / "c.sqlite"), "--variant", f"off={variant}"]) == 0
    report = json.loads((out / "multilingual.json").read_text(encoding="utf-8"))
    assert report["config"]["systems"] == ["graphrecall", "bm25", "dense", "off"]
    assert report["config"]["variants"] == {"off": {"newer_restatements": "off"}}
    assert all("off" in r["scores"] for r in report["questions"])
    assert '`off`: `{"newer_restatements": "off"}`' in (out / "multilingual.md").read_text(encoding="utf-8")
