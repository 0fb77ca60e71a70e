"""What one acknowledged ingest call writes to the log: a pydantic ``WriteEntry``.

An entry holds exactly what ingest would write to Kuzu for that call: the sessions it creates, its messages (with
their final ids and positions), its rounds (texts, index terms) and both vectors of every round as raw float32
bytes (rounded to half precision, as Kuzu stores them: ``store.vectors``). So a flush is a pure copy (no embedding, no id assignment, no reading of what is stored) and a replay after
a crash writes the same rows again. The rows are the store's own (``store.rows``: ``SessionRow``, ``MessageRow``,
``RoundRow``), serialized field by field; their JSON is the log's format, so a field added to a row must have a
default that reads older entries (and ``ENTRY_VERSION`` goes up when older readers must refuse the new ones).
``tests/data/wal/`` holds logs written by earlier releases, which every release must replay.

On disk an entry is two columns: the JSON of the model without its vectors (versioned: ``version``) and one BLOB
with the user vectors followed by the reply vectors (``len(rounds) * dim`` float32 each, little-endian, row-major),
then the passage vectors of long user turns (version 2: ``passage_counts[i]`` rows for round ``i``, in round
order; ``embed.passages``). A version 1 entry has no passages.

A message's ``lang`` (``MessageRow.lang``) is in the JSON since schema 5 without a new version: an older reader drops
it (an older store has no column for it), and an entry written before it is read with the language detected from
the message's text (``_upgrade``), as ingest would have stored it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from graphrecall.models import utcnow
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.vectors import rounded
from graphrecall.text import message_language

# Version of the JSON payload. A reader accepts every version up to this one (older payloads are upgraded on read
# by ``_upgrade``) and refuses newer ones: they were written by a newer graphrecall.
ENTRY_VERSION = 2
_F32 = np.dtype("<f4")


class WriteEntry(BaseModel):
    """One ingest call, acknowledged once it is in the log. ``seq`` is 0 until the log assigns it."""

    model_config = ConfigDict(frozen=True)

    seq: int = 0
    version: int = ENTRY_VERSION
    written_at: datetime = Field(default_factory=utcnow)
    dim: int = Field(ge=1)
    sessions: list[SessionRow] = Field(default_factory=list)
    messages: list[MessageRow] = Field(default_factory=list)
    rounds: list[RoundRow] = Field(default_factory=list)
    replaced_round_ids: list[str] = Field(default_factory=list)
    user_vectors: bytes = b""
    reply_vectors: bytes = b""
    passage_counts: list[int] = Field(default_factory=list)
    """Passages of each round's user turn (empty: none in this entry)."""
    passage_vectors: bytes = b""

    @model_validator(mode="after")
    def _vectors_fit(self) -> WriteEntry:
        want = len(self.rounds) * self.dim * _F32.itemsize
        for name in ("user_vectors", "reply_vectors"):
            got = len(getattr(self, name))
            if got != want:
                raise ValueError(
                    f"{name} has {got} bytes; {len(self.rounds)} rounds of dim {self.dim} need {want}"
                )
        if self.passage_counts and len(self.passage_counts) != len(self.rounds):
            raise ValueError(
                f"passage_counts has {len(self.passage_counts)} items for {len(self.rounds)} rounds"
            )
        if any(c < 0 for c in self.passage_counts):
            raise ValueError("passage_counts holds a negative count")
        want = sum(self.passage_counts) * self.dim * _F32.itemsize
        if len(self.passage_vectors) != want:
            raise ValueError(
                f"passage_vectors has {len(self.passage_vectors)} bytes; {sum(self.passage_counts)} passages of "
                f"dim {self.dim} need {want}"
            )
        return self

    @classmethod
    def from_rows(
        cls,
        *,
        sessions: Sequence[SessionRow],
        messages: Sequence[MessageRow],
        rounds: Sequence[RoundRow],
        user_vectors: Any,
        reply_vectors: Any,
        passages: Sequence[Any | None] = (),
        replaced_round_ids: Sequence[str] = (),
        dim: int,
    ) -> WriteEntry:
        """From what the writer plans: its rows (kept as they are, not copied), the two (n, dim) vector arrays,
        and per round ``None`` or its user turn's (passages, dim) vectors."""
        if passages and len(passages) != len(rounds):
            raise ValueError(f"{len(passages)} passage arrays for {len(rounds)} rounds")
        counts = [0 if p is None else len(p) for p in passages]
        owned = [p for p in passages if p is not None and len(p)]
        return cls(
            # An entry without passages is a valid version 1 entry: a graphrecall before passages can replay it.
            version=ENTRY_VERSION if owned else 1,
            dim=dim,
            sessions=list(sessions),
            messages=list(messages),
            rounds=list(rounds),
            replaced_round_ids=list(replaced_round_ids),
            user_vectors=_as_bytes(user_vectors, len(rounds), dim, "user_vectors"),
            reply_vectors=_as_bytes(reply_vectors, len(rounds), dim, "reply_vectors"),
            passage_counts=counts if any(counts) else [],
            passage_vectors=_as_bytes(np.concatenate(owned), sum(counts), dim, "passages") if owned else b"",
        )

    def user_matrix(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The user-side vectors as a read-only (rounds, dim) float32 array (no copy)."""
        return np.frombuffer(self.user_vectors, dtype=_F32).reshape(len(self.rounds), self.dim)

    def reply_matrix(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.frombuffer(self.reply_vectors, dtype=_F32).reshape(len(self.rounds), self.dim)

    def passages(self) -> list[np.ndarray[Any, np.dtype[np.float32]] | None]:
        """Per round, its user turn's passage vectors ((passages, dim), read-only) or ``None``."""
        if not self.passage_counts:
            return [None] * len(self.rounds)
        flat = np.frombuffer(self.passage_vectors, dtype=_F32).reshape(-1, self.dim)
        out: list[np.ndarray[Any, np.dtype[np.float32]] | None] = []
        at = 0
        for c in self.passage_counts:
            out.append(flat[at : at + c] if c else None)
            at += c
        return out

    # -- the on-disk form ------------------------------------------------------------------------------------
    def payload_json(self) -> str:
        return self.model_dump_json(exclude={"seq", "user_vectors", "reply_vectors", "passage_vectors"})

    def vector_blob(self) -> bytes:
        return self.user_vectors + self.reply_vectors + self.passage_vectors

    @classmethod
    def from_stored(cls, seq: int, payload: str, blob: bytes) -> WriteEntry:
        """Rebuild an entry read from the log; raises ``ValueError`` (with the reason) when it does not parse."""
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("payload is not a JSON object")
        data = _upgrade(data)
        n = len(data.get("rounds") or [])
        dim = data.get("dim")
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"payload has no valid dim ({dim!r})")
        half = n * dim * _F32.itemsize
        counts = data.get("passage_counts") or []
        if not isinstance(counts, list) or not all(isinstance(c, int) and c >= 0 for c in counts):
            raise ValueError(f"payload has invalid passage_counts ({counts!r})")
        extra = sum(counts) * dim * _F32.itemsize
        if len(blob) != 2 * half + extra:
            raise ValueError(
                f"vector blob has {len(blob)} bytes; {n} rounds and {sum(counts)} passages of dim {dim} need "
                f"{2 * half + extra}"
            )
        return cls.model_validate(
            {
                **data,
                "seq": seq,
                "user_vectors": blob[:half],
                "reply_vectors": blob[half : 2 * half],
                "passage_vectors": blob[2 * half :],
            }
        )


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """Check an older payload reads as ``ENTRY_VERSION``: version 1 has no passages, which the defaults say; a
    message written before languages were stored gets the one its text is in."""
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"payload has no valid version ({version!r})")
    if version > ENTRY_VERSION:
        raise ValueError(
            f"payload version {version} was written by a newer graphrecall (this one reads up to {ENTRY_VERSION})"
        )
    for m in data.get("messages") or ():
        if isinstance(m, dict) and "lang" not in m and isinstance(m.get("text"), str):
            m["lang"] = message_language(m["text"])
    return data


def _as_bytes(vectors: Any, rows: int, dim: int, what: str) -> bytes:
    """float32 bytes of the vectors rounded to half precision: the values Kuzu will hold for them
    (``store.vectors``), so the log's tail and a flushed scope score a round alike."""
    arr = np.ascontiguousarray(rounded(vectors), dtype=_F32)
    if rows == 0 and arr.size == 0:
        return b""
    if arr.shape != (rows, dim):
        raise ValueError(f"{what} has shape {arr.shape}; expected ({rows}, {dim})")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} holds NaN or infinite values")
    return arr.tobytes()
