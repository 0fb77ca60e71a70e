"""End to end over real HTTP with a real (small, local) model: a fact changes between two sessions.

Slow (minutes on 2 cores: the first structured request warms the grammar up) and opt-in: ``pytest -m e2e``.
It proves the path works - requests, structured output, storage, versioning - not that a 1.5B model is good.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.conftest import exchange, local_llm, local_memory

pytestmark = pytest.mark.e2e

SCOPE = ("e2e", "user")


def test_a_moved_user_ends_with_the_old_city_superseded_and_the_new_one_current(
    local_llm_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="graphrecall")
    llm = local_llm(local_llm_url)
    answers: list[str] = []  # the model's raw replies, printed so a failure shows what it actually said
    structured = llm._structured  # type: ignore[attr-defined]

    async def spy(*args: Any, **kwargs: Any) -> Any:
        reply = await structured(*args, **kwargs)
        answers.append(reply.text)
        return reply

    monkeypatch.setattr(llm, "_structured", spy)
    started = time.monotonic()
    with local_memory(tmp_path / "store", llm) as m:
        first = m.add_session(
            SCOPE,
            exchange(
                "Hi! I live in Munich and I work as a nurse.", "Nice to meet you! Munich is a lovely city."
            ),
            session_id="s1",
            date="2024-03-01T10:00:00",
            extract=True,
        )
        after_first = [f.text for f in m.facts(SCOPE)]
        second = m.add_session(
            SCOPE,
            exchange(
                "Big news: I moved to Berlin last month, so I live in Berlin now.",
                "Congratulations on the move to Berlin!",
            ),
            session_id="s2",
            date="2024-06-15T10:00:00",
            extract=True,
        )
        elapsed = time.monotonic() - started
        every = m.facts(SCOPE, include_superseded=True)
        current = m.facts(SCOPE)
        profile = m.profile(SCOPE)  # issue 13: the profile of what a real model extracted
        before_move = m.profile(SCOPE, as_of="2024-03-02")
        report = "\n".join(
            f"  {'current   ' if f.current else 'superseded'} {f.text!r} (by {f.superseded_by})"
            for f in every
        )
        print(f"\nextraction took {elapsed:.0f} s\n{first.extraction}\n{second.extraction}")
        print("raw answers:\n" + "\n".join(f"  {a}" for a in answers))
        print(f"facts after s1: {after_first}\nfacts:\n{report}")
        print(f"profile:\n{profile.text}\nprofile on 2024-03-02:\n{before_move.text}")
    assert first.extraction is not None and first.extraction.sessions_done == 1, first.extraction
    assert second.extraction is not None and second.extraction.sessions_done == 1, second.extraction
    assert any("berlin" in f.text.lower() for f in current), report
    assert not any("munich" in f.text.lower() and "live" in f.text.lower() and f.polarity == "positive"
                   for f in current), report  # fmt: skip
    superseded = [f for f in every if not f.current]
    assert any("munich" in f.text.lower() for f in superseded), report
    assert all(f.superseded_by for f in superseded)
    shown = {i.id for i in profile.items if i.source == "fact"}
    assert shown == {f.id for f in current}, profile.text  # every current fact, nothing superseded
    assert "berlin" in profile.text.lower(), profile.text
    assert {i.id for i in before_move.items if i.source == "fact"} == {
        f.id for f in every if f.session_id == "s1"
    }, before_move.text  # as of March 2nd: only what the first session said
