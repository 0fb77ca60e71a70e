"""The question date is taken at day precision: what was said later that day stays visible, later days do not."""

from __future__ import annotations

from pathlib import Path

from graphrecall import Memory, RetrievalConfig, Scope, Settings
from graphrecall.embed import HashingEmbedder

SCOPE = Scope(org_id="acme", user_id="alice")


def _sessions_found(root: Path, retrieval: RetrievalConfig | None = None) -> set[str]:
    with Memory.open(
        root, embedder=HashingEmbedder(64), settings=Settings(root=root), retrieval=retrieval
    ) as m:
        for sid, date in (("morning", "2024-05-20T08:00:00"), ("evening", "2024-05-20T21:00:00")):
            m.add_session(
                SCOPE, [{"role": "user", "content": "my sister lives in Lisbon"}], session_id=sid, date=date
            )
        m.add_session(
            SCOPE,
            [{"role": "user", "content": "my sister lives in Lisbon"}],
            session_id="days-later",
            date="2024-05-23",
        )
        return {
            h.session_id
            for h in m.search(SCOPE, "where does my sister live", 5, question_date="2024-05-20T12:00")
        }


def test_rounds_from_later_on_the_question_day_stay_visible_but_later_days_do_not(tmp_path: Path) -> None:
    assert _sessions_found(tmp_path / "a") == {"morning", "evening"}


def test_without_slack_the_question_date_is_exact(tmp_path: Path) -> None:
    assert _sessions_found(tmp_path / "b", RetrievalConfig(question_date_slack_hours=0)) == {"morning"}
