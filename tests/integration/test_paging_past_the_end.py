"""A page past the last fact or session is empty, and does not reach Kuzu's SKIP, which crashed the process
(segmentation fault) for ``offset=32768`` on a scope of one fact (found by the contract run)."""

from __future__ import annotations

from graphrecall import Memory

SCOPE = ("acme", "pager")


def test_pages_far_past_the_end_are_empty_and_the_process_lives(mem: Memory) -> None:
    mem.add_session(SCOPE, [{"role": "user", "content": "I moved to Berlin"}], session_id="s1")
    mem.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", source="s1")
    mem.flush()
    for offset in (1, 32_768, 10**6, 2**40):
        assert mem.facts(SCOPE, offset=offset) == []
        assert mem.sessions(SCOPE, offset=offset) == []
        assert mem.events(SCOPE, offset=offset) == []
        page = mem.graph(SCOPE, offset=offset)  # the console's graph pages facts and events the same way
        assert page.nodes == [] and page.edges == [] and not page.more
    assert [f.text for f in mem.facts(SCOPE)] == ["The user lives in Berlin."]
    assert [s.id for s in mem.sessions(SCOPE)] == ["s1"]
