"""``RetrievalConfig.newer_restatements`` in a real search: the newer of two rounds that say the same thing comes
first for a question about now, whether the rounds are in Kuzu or still in the write log's tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall import Memory, RetrievalConfig, Scope, Settings
from graphrecall.embed import HashingEmbedder

OLD = "My apartment is in Lisbon, near the river, and the commute to the office is a short tram ride."
NEW = "My apartment is in Berlin now, near the river, and the commute to the office is a short tram ride."


def sessions() -> list[dict[str, object]]:
    def one(sid: str, date: str, text: str) -> dict[str, object]:
        return {
            "session_id": sid,
            "date": date,
            "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
        }

    return [one("old", "2024-01-05", OLD), one("new", "2024-06-05", NEW)]


@pytest.mark.parametrize("resident", [0, 64], ids=["in-kuzu", "in-the-log"])
@pytest.mark.parametrize(("mode", "first"), [("now", "new"), ("off", None)])
def test_the_newer_restatement_comes_first_for_a_question_about_now(
    tmp_path: Path, resident: int, mode: str, first: str | None
) -> None:
    scope = Scope(org_id="acme", user_id="ana")
    cfg = RetrievalConfig(newer_restatements=mode, restatement_similarity=0.5)
    settings = Settings(root=tmp_path, resident_rounds=resident)
    with Memory.open(tmp_path, embedder=HashingEmbedder(256), settings=settings, retrieval=cfg) as mem:
        for s in sessions():
            mem.add_session(scope, s["messages"], session_id=s["session_id"], date=s["date"])  # type: ignore[arg-type]
        if resident == 0:
            mem.flush()
        hits = mem.search(scope, "Where is my apartment in Lisbon now?", k=2)
        assert {h.session_id for h in hits} == {"old", "new"}
        if first is not None:
            assert hits[0].session_id == first
        else:
            assert hits[0].session_id == "old"  # off: the question's own words ("Lisbon") decide
