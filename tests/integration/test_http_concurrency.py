"""Many clients at once: writes to one user queue on that user's write lock, writes to different users run side by
side, and neither surfaces an error to a client or loses a write."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from graphrecall import Memory
from graphrecall.server import create_app
from graphrecall.server.testing import serve_in_thread

THREADS = 8
WRITES_PER_THREAD = 3


@pytest.fixture
def url(mem: Memory) -> Iterator[str]:
    with serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as u:
        yield u


def test_parallel_writes_to_one_user_and_to_many_users_all_succeed_and_all_land(
    url: str, mem: Memory
) -> None:
    users = ["shared", "u1", "u2", "u3"]

    def worker(t: int) -> list[tuple[int, str, str]]:
        user = "shared" if t % 2 == 0 else users[1 + t % 3]
        done = []
        with httpx.Client(base_url=url, timeout=120) as c:
            for i in range(WRITES_PER_THREAD):
                sid = f"t{t}-w{i}"
                body = {
                    "session_id": sid,
                    "messages": [{"role": "user", "content": f"thread {t} write {i} zebra"}],
                }
                r = c.post(f"/v1/scopes/acme/{user}/sessions", json=body)
                done.append((r.status_code, user, sid))
                s = c.get(f"/v1/scopes/acme/{user}/search", params={"query": "zebra", "k": 3})
                done.append((s.status_code, user, "search"))
        return done

    with ThreadPoolExecutor(THREADS) as pool:
        results = [row for rows in pool.map(worker, range(THREADS)) for row in rows]

    assert {status for status, _, _ in results} == {200}
    written = [(user, sid) for _, user, sid in results if sid != "search"]
    assert len(written) == THREADS * WRITES_PER_THREAD
    for user in users:
        expected = sorted(sid for u, sid in written if u == user)
        stored = sorted(s.id for s in mem.sessions(("acme", user)))
        assert stored == expected, user


def test_concurrent_appends_to_one_session_are_numbered_without_loss(url: str, mem: Memory) -> None:
    def append(t: int) -> int:
        body = {"session_id": "chat", "messages": [{"role": "user", "content": f"line from client {t}"}]}
        return httpx.post(f"{url}/v1/scopes/acme/alice/messages", json=body, timeout=120).status_code

    with ThreadPoolExecutor(THREADS) as pool:
        statuses = list(pool.map(append, range(THREADS * 2)))
    assert statuses == [200] * (THREADS * 2)
    session = mem.get_session(("acme", "alice"), "chat")
    assert sorted(m.content for m in session.messages) == sorted(
        f"line from client {t}" for t in range(THREADS * 2)
    )
    assert sorted(m.idx for m in session.messages if m.idx is not None) == list(range(THREADS * 2))
