"""Consolidation end to end with a real (small, local) model over real HTTP: one call per cluster of similar facts,
one per old window of sessions, and a second run that writes nothing.

Opt-in and slow (``pytest -m e2e``; the conftest starts the llama.cpp server of /work/shared/llm or skips). It
proves the path (prompt files, structured answers, the merge and summary writes, idempotence), not that a 1.5B
model merges well: the assertions hold whichever way it decides each cluster.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from graphrecall import Memory
from graphrecall.config import ConsolidationConfig
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import llm_from_settings

pytestmark = pytest.mark.e2e

SCOPE = ("e2e", "tidy")


def test_consolidation_with_a_local_model(local_llm_url: str, tmp_path: Path) -> None:
    llm = llm_from_settings("openai:local", base_url=local_llm_url, timeout=900.0, max_retries=1)
    # add_fact without an LLM; a high rule threshold keeps the rewordings apart for consolidation to find
    extraction = ExtractionConfig(known_fact_min_similarity=0.999, max_tokens=512)
    consolidation = ConsolidationConfig(min_similarity=0.8, summary_min_age_days=30)
    started = time.monotonic()
    with Memory.open(tmp_path / "store", extraction=extraction, consolidation=consolidation) as m:
        m.add_session(
            SCOPE,
            [{"role": "user", "content": "I moved to Berlin in March and I started a pottery class."}],
            session_id="s1",
            date="2024-03-04T10:00:00",
        )
        m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", source="s1")
        m.add_fact(SCOPE, "The user lives in Berlin now.", kind="attribute", source="s1")
        m.add_fact(SCOPE, "The user has two kids.", kind="attribute")
        m.add_fact(SCOPE, "The user has three kids.", kind="attribute")

        r = m.consolidate(SCOPE, summaries=True, llm=llm)
        print(f"\nconsolidation took {time.monotonic() - started:.0f} s: {r.model_dump_json(indent=2)}")
        asked = [x for x in r.merges if x.decided_by == "llm"] + r.kept_separate
        failed = [e for e in r.errors if e.startswith("facts")]
        # one request per cluster asked and per window (two when the provider's one repair retry was needed)
        assert (
            len(asked) + len(failed) + len(r.summaries) <= r.llm_calls <= 2 * (len(asked) + len(failed) + 1)
        )
        assert r.input_tokens > 0
        assert all(s.fact_id == "fsum_20240304_7d" for s in r.summaries)

        again = m.consolidate(SCOPE, summaries=True, llm=llm)
        print(f"second run: {again.model_dump_json(indent=2)}")
        assert again.merges == [] and not (r.summaries and again.summaries)  # nothing new the second time
