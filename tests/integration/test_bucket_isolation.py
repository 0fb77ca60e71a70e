"""Many users in one bucket never see each other's rows, and a user erased whole leaves no trace.

Why a property test: with a database per user, isolation was a property of the layout; in a bucket it is a property
of every query (``store.database``: the scope invariant). Hypothesis interleaves the users' writes (through the
write log and into Kuzu), extractions (the scripted model), ``add_fact``, session erases, whole-user erases and
reads, all in one bucket (``buckets_per_org=1``), with the same session ids and the same entity names for every
user; after each step every read of a user must hold that user's words and no other's. Each user's texts carry a
token of its own (``tok3x``), so a row of another user is recognized wherever it shows up.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.index import index_dir
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.llm.base import ChatMessage
from graphrecall.store import schema

USERS = [Scope(org_id="acme", user_id=f"u{i}") for i in range(4)]
TOKEN = re.compile(r"tok\d+x")
EXTRACT = "Extract four lists"
VERSION = "New facts, each followed"


def token(scope: Scope) -> str:
    return f"tok{scope.user_id[1:]}x"


def _prompt(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content for m in messages)


def _extract(messages: list[ChatMessage]) -> dict[str, Any]:
    """A fact and an event about Rex per session, carrying the user's token (found in the prompt)."""
    tok = TOKEN.search(_prompt(messages))
    assert tok is not None, "the extraction prompt holds no user's words"
    ids = sorted(set(re.findall(r"\bm\d+\b", _prompt(messages))))[:1] or ["m1"]
    return {
        "facts": [{"text": f"{tok.group()} walks Rex every day", "kind": "attribute", "message_ids": ids,
                   "about": ["Rex"]}],
        "events": [{"subject": "user", "verb": "walk", "object": "Rex", "text": f"{tok.group()} walked Rex.",
                    "message_ids": ids}],
        "entities": [{"name": "Rex", "type": "animal", "aliases": ["the dog"]}],
        "relations": [],
    }  # fmt: skip


def _versions(messages: list[ChatMessage]) -> dict[str, Any]:
    labels = sorted(set(re.findall(r"\bn\d+\b", _prompt(messages))))
    return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "test"} for n in labels]}


def scripted() -> ScriptedLLM:
    return ScriptedLLM([Step(EXTRACT, _extract), Step(VERSION, _versions)], ordered=False)


def open_memory(root: Path, resident_rounds: int = 2) -> Memory:
    return Memory.open(
        root,
        embedder=HashingEmbedder(64),
        llm=scripted(),
        extraction=ExtractionConfig(background=False),
        settings=Settings(root=root, buckets_per_org=1, resident_rounds=resident_rounds),
    )


def texts_of(m: Memory, scope: Scope) -> list[str]:
    """Every text a read of ``scope`` returns: search hits, context, facts, events, sessions, the export."""
    out = [h.text for h in m.search(scope, "Rex tea walked said thing", k=50)]
    out.append(m.context(scope, "what about Rex and tea?").text)
    if scope not in m.scopes():  # nothing stored: the reads below answer NotFound
        return out
    out += [f.text for f in m.facts(scope, include_superseded=True)]
    out += [e.text for e in m.events(scope)]
    doc = m.export_scope(scope)
    out += [msg.content for s in doc.sessions for msg in s.messages]
    out += [f.text for f in doc.facts] + [e.text for e in doc.events]
    return out


def assert_only_own(m: Memory, scope: Scope) -> None:
    mine = token(scope)
    for text in texts_of(m, scope):
        others = set(TOKEN.findall(text)) - {mine}
        assert not others, f"{scope.user_id} sees {sorted(others)} in {text!r}"


class SharedBucket(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="isolation-"))
        self.m = open_memory(self.tmp / "store")
        self.sessions: dict[Scope, set[str]] = {s: set() for s in USERS}

    @rule(user=st.sampled_from(USERS), n=st.integers(0, 5))
    def write(self, user: Scope, n: int) -> None:
        sid = f"s{n}"  # the same session ids for every user
        self.m.add_messages(
            user,
            [{"role": "user", "content": f"{token(user)} said thing {n} about Rex and tea"},
             {"role": "assistant", "content": f"Noted, {token(user)}."}],
            session_id=sid,
        )  # fmt: skip
        self.sessions[user].add(sid)

    @rule(user=st.sampled_from(USERS))
    def extract(self, user: Scope) -> None:
        if self.sessions[user]:
            self.m.extract(user)

    @rule(user=st.sampled_from(USERS), k=st.integers(0, 3))
    def add_fact(self, user: Scope, k: int) -> None:
        self.m.add_fact(user, f"{token(user)} likes tea number {k}", entities=["Rex"])

    @rule(user=st.sampled_from(USERS), n=st.integers(0, 5))
    def erase_session(self, user: Scope, n: int) -> None:
        if f"s{n}" in self.sessions[user]:
            self.m.erase(user, session_ids=[f"s{n}"])
            self.sessions[user].discard(f"s{n}")

    @rule(user=st.sampled_from(USERS))
    def forget(self, user: Scope) -> None:
        self.m.forget(user)
        self.sessions[user] = set()

    @rule(user=st.sampled_from(USERS))
    def reopen(self, user: Scope) -> None:
        """Close and open again: what the bucket and the logs hold, read cold."""
        self.m.close()
        self.m = open_memory(self.tmp / "store")
        assert_only_own(self.m, user)

    @invariant()
    def every_user_sees_only_itself(self) -> None:
        for user in USERS:
            assert_only_own(self.m, user)
            stored = user in self.m.scopes()
            assert ({s.id for s in self.m.sessions(user)} if stored else set()) == self.sessions[user]

    def teardown(self) -> None:
        self.m.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


SharedBucket.TestCase.settings = settings(
    max_examples=8, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
)
test_users_in_one_bucket_never_see_each_other = SharedBucket.TestCase


def test_concurrent_users_of_one_bucket_see_only_themselves(tmp_path: Path) -> None:
    """Threads write, extract and search different users of one bucket at once (the bucket's one writer and its
    shared reads); every read holds only its user's words."""
    errors: list[BaseException] = []
    with open_memory(tmp_path / "store", resident_rounds=0) as m:

        def work(user: Scope) -> None:
            try:
                for n in range(6):
                    m.add_session(
                        user,
                        [
                            {"role": "user", "content": f"{token(user)} said thing {n} about Rex and tea"},
                            {"role": "assistant", "content": "Noted."},
                        ],
                        session_id=f"s{n}",
                    )
                    if n % 2:
                        m.flush()
                        m.extract(user)
                    assert_only_own(m, user)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(u,)) for u in USERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        if errors:
            raise errors[0]
        for user in USERS:
            assert_only_own(m, user)
            assert len(m.sessions(user)) == 6 and m.facts(user)


def _bucket_strings(m: Memory, scope: Scope) -> list[str]:
    """Every string of every row of the bucket that holds ``scope`` (all users'): where a trace would be."""
    with testing.database(m, scope) as db:
        out: list[str] = []
        for table in ("Scope", *schema.SCOPE_TABLES):
            for row in db.bucket.query(f"MATCH (n:{table}) RETURN n"):
                out += [str(v) for v in row[0].values() if isinstance(v, (str, list))]
        return out


def test_a_user_erased_whole_leaves_no_trace_and_the_others_keep_everything(tmp_path: Path) -> None:
    root = tmp_path / "store"
    gone, kept = USERS[0], USERS[1]
    with open_memory(root, resident_rounds=0) as m:
        for user in (gone, kept):
            for n in range(3):
                m.add_session(
                    user,
                    [
                        {"role": "user", "content": f"{token(user)} said thing {n} about Rex and tea"},
                        {"role": "assistant", "content": f"Noted, {token(user)}."},
                    ],
                    session_id=f"s{n}",
                )
            m.flush()
            m.extract(user)
            m.add_fact(user, f"{token(user)} likes tea", entities=["Rex"])
        before = texts_of(m, kept)
        with testing.database(m, gone) as db:
            prefix, bucket_path = db.prefix, db.bucket.path
        assert any(token(gone) in s for s in _bucket_strings(m, kept))

        assert m.forget(gone)

        strings = _bucket_strings(m, kept)
        assert not any(token(gone) in s or s.startswith(prefix) for s in strings), "a row of the erased user"
        assert gone.user_id not in strings  # its Scope row too
        with testing.database(m, kept) as db:
            assert db.bucket.path == bucket_path  # the same bucket: the erase was of rows, not of a file
            for rel in [*schema.rel_names(), "OWNS"]:
                ends = db.bucket.query(f"MATCH (a)-[r:{rel}]->(b) RETURN a.key, b.key")
                assert not any(str(a).startswith(prefix) or str(b).startswith(prefix) or a == gone.user_id
                               for a, b in ends), f"an edge of the erased user in {rel}"  # fmt: skip
        assert not index_dir(testing.pool(m).path_for(gone)).exists()  # its vectors and index entries
        assert not testing.logs(m).path(gone).exists()  # its write log
        assert m.search(gone, "Rex tea", k=5) == [] and m.sessions(gone) == [] and m.facts(gone) == []
        assert texts_of(m, kept) == before
    with open_memory(root) as m:  # and after a restart
        assert texts_of(m, kept) == before and m.scopes() == [kept]
