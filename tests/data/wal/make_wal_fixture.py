"""Write ``tests/data/wal/<name>.tar.gz``: one scope that lives in its write log, its entries still in the log.

Run once, with the code whose log format is to be frozen, from an export of that commit (see README.md beside
this file); never again with newer code: the archive is the old format. Only the public API is used.

    HF_HUB_OFFLINE=1 PYTHONPATH=<export>/src python tests/data/wal/make_wal_fixture.py tests/data/wal/<name>.tar.gz
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder

SCOPE = Scope(org_id="fixture", user_id="ana")
LONG = (
    "Let me tell you about the trip. We flew to Lisbon in May and stayed in Alfama for a week. "
    "The tram up the hill was always full, so we walked. My sister joined us for the weekend and we ate "
    "grilled sardines by the river. On the last day I lost my passport at the airport, and the consulate "
    "gave me an emergency one within three hours, which I still cannot believe."
)


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        settings = Settings(root=root, resident_rounds=1000, flush_max_age_s=3600)
        with Memory.open(root, embedder=HashingEmbedder(64), settings=settings) as m:
            m.add_session(
                SCOPE,
                [
                    {"role": "user", "content": "We adopted a beagle puppy called Biscuit!"},
                    {"role": "assistant", "content": "Congratulations! Beagles love long walks."},
                ],
                session_id="s1",
                date="2024-05-20T18:30:00",
            )
            m.add_messages(SCOPE, [{"role": "user", "content": "He chewed my left shoe."}], session_id="s1",
                           date="2024-05-21T08:00:00")  # fmt: skip
            m.add_messages(SCOPE, [{"role": "assistant", "content": "Puppies teethe until six months."}],
                           session_id="s1", date="2024-05-21T08:00:00")  # fmt: skip
            m.add_messages(
                SCOPE,
                [
                    {"role": "system", "content": "Be brief."},
                    {"id": "trip-u", "role": "user", "content": LONG, "at": "2024-06-02T10:00:00+02:00"},
                    {"id": "trip-a", "role": "assistant", "content": "What a trip."},
                ],
                session_id="s2",
                date="2024-06-02T07:00:00",
            )
        append_passages(root / SCOPE.org_id / f"{SCOPE.user_id}.log.sqlite")
        with tarfile.open(out, "w:gz") as tar:
            for p in sorted(root.rglob("*")):
                if p.is_file() and not p.name.endswith(".lock"):
                    tar.add(p, arcname=str(p.relative_to(root)))


def append_passages(path: Path) -> None:
    """A version 2 entry (a long user turn with passage vectors), appended as ingest would with an embedder that
    has a window (the hashing embedder has none, so ``Memory`` never writes one with it). The code of the frozen
    commit: ``WriteEntry.from_rows`` took sessions as ``(id, started_at)`` pairs then."""
    from datetime import datetime

    from graphrecall.ingest import build_rounds, message_rows
    from graphrecall.models import Message
    from graphrecall.store.wal import WriteEntry, WriteLog

    emb = HashingEmbedder(64)
    rows = message_rows(
        "s3", [Message(role="user", content=LONG)], start_idx=0, date=datetime(2024, 7, 1, 9, 0)
    )
    rounds = build_rounds("s3", rows)
    user = emb.embed([rounds[0].user_text])
    parts = emb.embed(["We flew to Lisbon in May.", "My sister joined us.", "I lost my passport."])
    entry = WriteEntry.from_rows(
        sessions=[("s3", datetime(2024, 7, 1, 9, 0))], messages=rows, rounds=rounds, user_vectors=user,
        reply_vectors=user, passages=[parts], dim=emb.dim,
    )  # fmt: skip
    with WriteLog(path) as log:
        log.append(entry)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
