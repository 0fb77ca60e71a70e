"""Each message is stored with the language it is in (``Message.lang``), detected once when it is written, and
returned wherever messages are: from the write log's tail, from Kuzu after a flush, from a bulk ingest, in the
sessions export and the scope export; an import detects it again (a file without it imports as before)."""

from __future__ import annotations

import json
from pathlib import Path

from graphrecall import Memory, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.models import ScopeExport
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.writer import LOG_MAX_ROUNDS

SCOPE = ("acme", "polyglot")
COPY = ("acme", "polyglot-copy")
SESSIONS = {
    "en": [
        ("user", "Last month I moved to Denver with my partner."),
        ("assistant", "Congratulations on the move! How are you finding Denver so far?"),
    ],
    "ru": [
        ("user", "Я переехал в Москву и теперь работаю в банке."),
        ("assistant", "Поздравляю с переездом! Как тебе новая работа?"),
        ("user", "ok"),  # too short to tell
    ],
    "zh": [
        ("user", "我上个月搬到了上海，现在在一家银行工作。"),
        ("assistant", "恭喜你搬家！新工作怎么样？"),
    ],
    "de": [("user", "Letzten Monat bin ich nach Hamburg umgezogen.")],
}
LANGS = {"en": ["en", "en"], "ru": ["ru", "ru", ""], "zh": ["zh", "zh"], "de": ["de"]}


def add_all(m: Memory, scope: tuple[str, str] = SCOPE) -> None:
    for sid, turns in SESSIONS.items():
        m.add_session(scope, [{"role": r, "content": c} for r, c in turns], session_id=sid, date="2024-05-01")


def langs(m: Memory, scope: tuple[str, str] = SCOPE) -> dict[str, list[str]]:
    return {sid: [x.lang for x in m.get_session(scope, sid).messages] for sid in SESSIONS}


def test_the_language_is_stored_with_each_message_and_returned_from_the_log_and_from_kuzu(
    tmp_path: Path,
) -> None:
    with Memory.open(tmp_path, embedder=HashingEmbedder(64)) as m:
        add_all(m)
        assert langs(m) == LANGS  # served from the write log's tail
        m.flush()
        with testing.database(m, SCOPE) as db:
            stored = db.query(f"{MATCH_SCOPE}MATCH {owned('x', 'Message')} RETURN x.id, x.lang ORDER BY x.id")
        assert stored == sorted(
            [f"{sid}#{i}", lang] for sid, ls in LANGS.items() for i, lang in enumerate(ls)
        )
        assert langs(m) == LANGS  # from Kuzu
        # Appending to a stored session detects the new turn's language only.
        m.add_messages(
            SCOPE,
            [{"role": "user", "content": "Ahora trabajo en una panadería en Sevilla."}],
            session_id="en",
        )
        assert [x.lang for x in m.get_session(SCOPE, "en").messages] == ["en", "en", "es"]


def test_exports_carry_the_language_and_imports_detect_it_again(tmp_path: Path) -> None:
    with Memory.open(tmp_path, embedder=HashingEmbedder(64)) as m:
        add_all(m)
        exported = {s.id: [x.lang for x in s.messages] for s in m.export_sessions(SCOPE)}
        assert exported == LANGS
        doc = json.loads(m.export_scope(SCOPE).model_dump_json())
        assert {s["id"]: [x["lang"] for x in s["messages"]] for s in doc["sessions"]} == LANGS
        # A file written before languages were stored (no "lang"), or one that claims a wrong one: the importing
        # store detects each message's language itself.
        for s in doc["sessions"]:
            for i, x in enumerate(s["messages"]):
                if i % 2:
                    del x["lang"]
                else:
                    x["lang"] = "fr"
        m.import_scope(COPY, ScopeExport.model_validate(doc))
        assert langs(m, COPY) == LANGS
        # The sessions format too.
        plain = [
            {
                "id": sid,
                "started_at": "2024-05-01T00:00:00",
                "messages": [{"role": r, "content": c} for r, c in turns],
            }
            for sid, turns in SESSIONS.items()
        ]
        m.import_sessions(("acme", "plain"), plain)
        assert langs(m, ("acme", "plain")) == LANGS


def test_a_bulk_ingest_straight_into_kuzu_stores_the_languages_too(tmp_path: Path) -> None:
    n = LOG_MAX_ROUNDS + 6  # more rounds than the write log takes: written straight into Kuzu
    bulk = [
        {
            "session_id": f"b{i}",
            "date": "2024-05-01",
            "messages": [
                {"role": "user", "content": "Я переехал в Москву и теперь работаю в банке." if i % 2 else
                 f"Session {i}: I moved to Denver and work at a bank now."},
            ],
        }
        for i in range(n)
    ]  # fmt: skip
    with Memory.open(tmp_path, embedder=HashingEmbedder(64)) as m:
        m.add_sessions(SCOPE, bulk)
        assert m.stored(SCOPE)
        with testing.database(m, SCOPE) as db:
            got = dict(db.query(f"{MATCH_SCOPE}MATCH {owned('x', 'Message')} RETURN x.session_id, x.lang"))
        assert got == {f"b{i}": "ru" if i % 2 else "en" for i in range(n)}
        assert m.get_session(SCOPE, "b1").messages[0].lang == "ru"


def legacy_store(built: Path, path: Path) -> None:
    """A database per scope at ``path`` (schema 5, the layout before buckets) holding what ``add_all`` writes."""
    from graphrecall.store.legacy import write_legacy
    from graphrecall.store.move import BucketSource

    with Memory.open(built, embedder=HashingEmbedder(64)) as m:
        add_all(m)
        m.flush()
        with testing.database(m, SCOPE) as db:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_legacy(
                path,
                BucketSource(db.bucket, db.user_id),
                embedder_id=db.bucket.embedder_id,
                dim=64,
                marks=db._marks,
            )


def test_a_schema_4_store_gets_its_languages_on_open_even_after_a_crash_half_way(tmp_path: Path) -> None:
    """A store as schema 4 left it (no column), and one whose upgrade stopped after adding the column (version still
    4, every language ''): both open with every message's language. The frozen schema 4 store is checked by
    test_upgrade_fixture.py; this one has other languages than English."""
    import kuzu

    for crashed_after_alter in (False, True):
        root = tmp_path / f"store-{crashed_after_alter}"
        path = root / SCOPE[0] / f"{SCOPE[1]}.kuzu"
        legacy_store(tmp_path / f"built-{crashed_after_alter}", path)
        db = kuzu.Database(str(path))
        conn = kuzu.Connection(db)
        conn.execute("ALTER TABLE Message DROP lang")
        if crashed_after_alter:
            conn.execute("ALTER TABLE Message ADD lang STRING DEFAULT ''")
        conn.execute("MATCH (x:Meta {key: 'meta'}) SET x.schema_version = 4")
        conn.execute("CHECKPOINT")
        conn.close()
        db.close()
        with Memory.open(root, embedder=HashingEmbedder(64)) as m:
            assert langs(m) == LANGS
            assert not path.exists()  # moved into its bucket
            assert m.search(SCOPE, "where did I move to Denver?", k=1)[0].session_id == "en"
