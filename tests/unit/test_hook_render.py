"""``hooks.render.prompt``: what the prompt hook prints names each hit's session by an id the agent can look up,
also for a hit from the project's shared scope, whose session id comes qualified by that scope."""

from __future__ import annotations

from datetime import UTC, datetime

from graphrecall.hooks import render
from graphrecall.models import Hit, Scope


def _hit(session_id: str, scope: Scope) -> Hit:
    return Hit(
        id=f"{session_id}@0",
        text="user: The API tests run against Postgres 16.",
        score=1.0,
        session_id=session_id,
        date=datetime(2026, 12, 1, 10, tzinfo=UTC),
        scope=scope,
    )


def test_a_shared_scope_hit_shows_its_session_not_the_scope_prefix() -> None:
    project = Scope(org_id="local", user_id="_project-proj")
    out = render.prompt([_hit("_project-proj/4f1c2a9e-5b7d", project)], where="project proj", budget=400)
    assert "(session 4f1c2a9e)" in out
    assert "_project" not in out.split("\n", 1)[1]


def test_an_own_hit_shows_the_first_eight_characters_of_its_session() -> None:
    out = render.prompt(
        [_hit("a1b2c3d4e5f6", Scope(org_id="local", user_id="me"))], where="local/me", budget=400
    )
    assert "(session a1b2c3d4)" in out
    assert out.startswith("Relevant memory (local/me, graphrecall):")
