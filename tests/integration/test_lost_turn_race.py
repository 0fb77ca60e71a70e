"""Chat turns written while flushes, graduations, pool evictions and reads run: no read ever sees a torn round.

Why: the README's example once printed a context whose round held the assistant's reply without the user's turn
that answered the question (on a loaded machine, right after the write). A round is torn when the writer plans it
against an incomplete view of what is stored: the write log's tail (unflushed) plus Kuzu (flushed). This test
drives every path that moves a turn from one to the other while turns are written and read:

- chat turns as a live assistant writes them: the user's message, a search and a context for it, then the reply,
  in two ``add_messages`` calls (numbered by the store, or with the application's own ids), or the whole session
  so far again (``add_session``, as a client that resends the conversation);
- users served in bursts by a few workers, a pool of one open database, so a user's database is closed and opened
  again between bursts while its last turns may still wait in the log;
- the background flusher with a very short age, and ``Memory.flush`` from another thread;
- graduation: a scope reaching ``Settings.resident_rounds`` moves from its log into Kuzu;
- searches and contexts of random earlier turns on another thread.

It asserts what a user of the library sees: every hit's round and every context hold the round's own user turn,
each acknowledged turn is found by its own word, and at the end every session holds exactly the messages sent.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder

RUN_SECONDS = 2.0  # at least; then until MIN_TURNS turns were written, for at most MAX_SECONDS
MIN_TURNS = 8
MAX_SECONDS = 6.0
TURNS_PER_SESSION = 8


@dataclass(frozen=True)
class Load:
    """One shape of traffic and settings."""

    workers: int  # server threads, each serving its own users in bursts
    users: int  # per worker
    pool_size: int  # open databases; the process keeps twice as many write logs open
    flush_max_age_s: float
    readers: int  # threads searching random earlier turns of any user
    flush_every_s: float  # Memory.flush from another thread


LOADS = {
    # Every scope's database and write log closed and opened again between bursts (3 users, 1 database, 2 logs),
    # everything flushed within ~20 ms: churn, graduation and reads all the time.
    "churn": Load(workers=1, users=3, pool_size=1, flush_max_age_s=0.02, readers=1, flush_every_s=0.02),
    # Turns wait in the log for a while (0.3 s), 3 users share 2 databases, an explicit flush now and then: a user's
    # database is opened again while its last turns still wait, and they are flushed into that database.
    "waiting": Load(workers=1, users=3, pool_size=2, flush_max_age_s=0.3, readers=0, flush_every_s=0.2),
}


@dataclass
class Written:
    """What the writers sent, shared with the readers: per round id, the user turn it must hold."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    user_turn: dict[tuple[Scope, str], str] = field(default_factory=dict)  # (scope, round id) -> user text
    acked: list[tuple[Scope, str, str]] = field(default_factory=list)  # (scope, round id, its word), written
    sessions: dict[tuple[Scope, str], list[str]] = field(default_factory=dict)  # message texts in order
    errors: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def word(*parts: int) -> str:
    """A word no other turn holds (letters only: the tokenizer keeps it whole)."""
    return "zq" + "x".join("".join(chr(ord("a") + int(c)) for c in str(p)) for p in parts)


@dataclass
class Chat:
    """One user's conversation as the assistant has sent it so far."""

    scope: Scope
    number: int
    session: int = 0
    turn: int = 0
    style: str = "numbered"
    texts: list[str] = field(default_factory=list)

    @property
    def sid(self) -> str:
        return f"s{self.session}"

    def next_session(self, rnd: random.Random) -> None:
        self.session, self.turn, self.texts = self.session + 1, 0, []
        self.style = rnd.choice(["numbered", "own_ids", "whole"])


def check_hits(w: Written, scope: Scope, question: str, ids_texts: list[tuple[str, str]], where: str) -> None:
    """Every round shown holds its own user turn (a torn round holds only the reply, or another turn's words)."""
    with w.lock:
        for rid, text in ids_texts:
            want = w.user_turn.get((scope, rid))
            if want is None:
                w.errors.append(f"{where} {question!r}: round {rid} of {scope} was never written: {text!r}")
            elif f"user: {want}" not in text.splitlines():
                w.errors.append(
                    f"{where} {question!r}: round {rid} of {scope} lacks its user turn {want!r}: {text!r}"
                )


def ask(m: Memory, w: Written, scope: Scope, rid: str, key: str) -> None:
    """Search and context for one acknowledged turn's word: its round is found, and every round shown is whole."""
    question = f"what is {key}?"
    hits = m.search(scope, question, k=5)
    ctx = m.context(scope, question, token_budget=400, k=5)
    check_hits(w, scope, question, [(h.id, h.text) for h in hits], "search")
    check_hits(w, scope, question, [(h.id, h.text) for h in ctx.hits], "context")
    with w.lock:
        for h in ctx.hits:
            want = w.user_turn.get((scope, h.id))
            if want is not None and want not in ctx.text:
                w.errors.append(f"context {question!r}: its text lacks the user turn of {h.id}: {ctx.text!r}")
    if rid not in [h.id for h in hits]:
        w.fail(
            f"search {question!r} in {scope}: acknowledged round {rid} not found in {[h.id for h in hits]}"
        )


def one_turn(m: Memory, w: Written, c: Chat, worker: int) -> None:
    """The user's message, a search and a context as the assistant would run before replying, then the reply."""
    n, sid = c.turn, c.sid
    key = word(worker, c.number, c.session, n)
    user = f"the code word for turn {n} is {key}"
    reply = f"noted turn {n} of session {sid}"
    rid = f"{sid}@{n}"
    with w.lock:
        w.user_turn[(c.scope, rid)] = user
    if c.style == "whole":
        c.texts += [user, reply]
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(c.texts)]
        m.add_session(c.scope, msgs, session_id=sid, date="2024-05-20T18:30:00")
        with w.lock:
            w.acked.append((c.scope, rid, key))
        ask(m, w, c.scope, rid, key)
    else:
        ids = c.style == "own_ids"
        m.add_messages(
            c.scope,
            [{"role": "user", "content": user, **({"id": f"{sid}-u{n}"} if ids else {})}],
            session_id=sid,
        )
        with w.lock:
            w.acked.append((c.scope, rid, key))
        ask(m, w, c.scope, rid, key)
        m.add_messages(
            c.scope,
            [{"role": "assistant", "content": reply, **({"id": f"{sid}-a{n}"} if ids else {})}],
            session_id=sid,
        )
        c.texts += [user, reply]
    with w.lock:
        w.sessions[(c.scope, sid)] = list(c.texts)
    c.turn += 1


def serve(m: Memory, worker: int, users: int, w: Written, stop: threading.Event) -> None:
    """A server worker: its users in bursts of a few turns each, a new session now and then."""
    rnd = random.Random(worker)
    chats = [Chat(Scope(org_id="acme", user_id=f"w{worker}u{i}"), i) for i in range(users)]
    for c in chats:
        c.next_session(rnd)
    while not stop.is_set():
        c = rnd.choice(chats)
        for _ in range(rnd.randint(1, 3)):
            if stop.is_set():
                return
            try:
                one_turn(m, w, c, worker)
            except Exception as e:  # reported by the test, with the turn
                w.fail(f"turn {c.turn} of {c.scope} {c.sid}: {e!r}")
                return
            if c.turn >= TURNS_PER_SESSION or rnd.random() < 0.1:
                c.next_session(rnd)


def read(m: Memory, w: Written, stop: threading.Event) -> None:
    """Searches of random earlier turns, of any user."""
    rnd = random.Random(99)
    while not stop.is_set():
        with w.lock:
            target = w.acked[rnd.randrange(len(w.acked))] if w.acked else None
        if target is None:
            time.sleep(0.005)
            continue
        try:
            ask(m, w, *target)
        except Exception as e:  # reported by the test
            w.fail(f"read {target}: {e!r}")
            return


def flush(m: Memory, every_s: float, w: Written, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            m.flush()
        except Exception as e:  # reported by the test
            w.fail(f"flush: {e!r}")
            return
        time.sleep(every_s)


@pytest.mark.parametrize("load", list(LOADS.values()), ids=list(LOADS))
def test_turns_racing_flushes_graduation_and_reads_never_tear_a_round(tmp_path: Path, load: Load) -> None:
    root = tmp_path / "store"
    settings = Settings(
        root=root, resident_rounds=3, flush_max_age_s=load.flush_max_age_s, pool_size=load.pool_size
    )
    w = Written()
    stop = threading.Event()
    with Memory.open(root, embedder=HashingEmbedder(64), settings=settings) as m:
        threads = [
            threading.Thread(target=serve, args=(m, i, load.users, w, stop)) for i in range(load.workers)
        ]
        threads += [threading.Thread(target=read, args=(m, w, stop)) for _ in range(load.readers)]
        threads.append(threading.Thread(target=flush, args=(m, load.flush_every_s, w, stop)))
        for t in threads:
            t.start()
        start = time.monotonic()
        while not w.errors:
            elapsed = time.monotonic() - start
            if elapsed > MAX_SECONDS or (elapsed > RUN_SECONDS and len(w.acked) >= MIN_TURNS):
                break
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not w.errors, "\n".join(w.errors[:10])
        assert len(w.acked) >= MIN_TURNS // 2, (
            f"only {len(w.acked)} turns written: the race was not exercised"
        )
        m.flush()
        for (scope, sid), texts in sorted(w.sessions.items(), key=lambda kv: (kv[0][0].user_id, kv[0][1])):
            stored = [msg.content for msg in m.get_session(scope, sid).messages]
            assert stored == texts, f"{scope} {sid}: stored {stored}, sent {texts}"


def test_a_reply_planned_on_a_reopened_database_keeps_the_user_turn_the_flusher_moved(tmp_path: Path) -> None:
    """The interleaving behind the torn round, step by step (the stress test above meets it by chance): a user's
    turn waits in the write log; the pool closes that user's database (another user's search needs the one slot)
    and the reply opens it again while the turn still waits; a flush moves the turn into Kuzu and out of the log's
    tail; then the next reply. Before the fix the writer's cache of stored ids had been loaded while the turn only
    waited in the log and never learned of the flush: that reply was numbered as the session's first message,
    its round held the reply alone, and the flush dropped the reply as a duplicate id."""
    root = tmp_path / "store"
    settings = Settings(root=root, resident_rounds=0, flush_max_age_s=3600, pool_size=1)
    ana, bo = Scope(org_id="acme", user_id="ana"), Scope(org_id="acme", user_id="bo")
    with Memory.open(root, embedder=HashingEmbedder(64), settings=settings) as m:
        m.add_messages(bo, [{"role": "user", "content": "hello"}], session_id="x")
        m.flush()  # bo has nothing waiting: flushing it later opens nothing
        m.add_messages(
            ana, [{"role": "user", "content": "We adopted a beagle puppy called Biscuit!"}], session_id="chat"
        )
        m.search(bo, "hello")  # bo's database takes the pool's one slot: ana's is closed
        m.add_messages(ana, [{"role": "assistant", "content": "Congratulations!"}], session_id="chat")
        m.flush()  # ana's turns move into Kuzu, into the database the reply opened, and out of the tail
        r = m.add_messages(
            ana, [{"role": "assistant", "content": "Beagles love long walks."}], session_id="chat"
        )
        want = "user: We adopted a beagle puppy called Biscuit!\nassistant: Congratulations!\nassistant: Beagles love long walks."
        for hits in (
            m.search(ana, "What is my dog's name?", k=3),
            m.context(ana, "What is my dog's name?", 800).hits,
        ):
            assert [(h.id, h.text) for h in hits] == [("chat@0", want)]
        assert (r.sessions_added, r.messages_added, r.messages_skipped) == (0, 1, 0)
        m.flush()
        assert [(x.id, x.content) for x in m.get_session(ana, "chat").messages] == [
            ("chat#0", "We adopted a beagle puppy called Biscuit!"),
            ("chat#1", "Congratulations!"),
            ("chat#2", "Beagles love long walks."),
        ]
