"""A scope's copy in a bucket as Kuzu 0.11.3 leaves it when a kill cuts off the checkpoint of the copy's commit
(store/move.py's docstring): the ``Scope`` row, the sessions and the facts kept, the rows a ``COPY`` wrote (messages,
rounds, passages) gone with their edges. Measured once with Kuzu alone and once in a killed ``graphrecall reembed``;
a kill cannot be timed to land there in a test, so tests make that state by hand."""

from __future__ import annotations

from pathlib import Path

from graphrecall.models import Scope
from graphrecall.store import buckets, schema
from graphrecall.store.database import BucketDatabase


def tear(root: Path, scope: Scope, embedder_id: str) -> int:
    """Delete the scope's messages, rounds and passages from its bucket of ``embedder_id`` under ``root``; how many
    rows went."""
    [m] = [m for m in buckets.manifests(root, scope.org_id) if m.embedder_id == embedder_id]
    bucket = BucketDatabase(m.path_for(scope.user_id), embedder_id=m.embedder_id, dim=m.dim)
    try:
        gone = 0
        for table in ("Passage", "Round", "Message"):
            match = f"{schema.MATCH_SCOPE}MATCH {schema.owned('n', table)} "
            [[n]] = bucket.query(match + "RETURN count(n)", {"scope": scope.user_id})
            bucket.writer.execute(match + "DETACH DELETE n", {"scope": scope.user_id})
            gone += int(n)
        bucket.checkpoint()
        return gone
    finally:
        bucket.close()
