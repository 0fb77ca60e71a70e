"""End to end with the real (small, local) model: a learned document is extracted and answers a question.

Opt-in (``pytest -m e2e``) and slow on 2 cores. It proves the path works with a real model over real HTTP - the
extraction prompt's ``[document]`` messages, structured output, facts citing the document's messages, the Reader
finding a document passage beside the chat - not that a 1.5B model is good: what it answered is printed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.e2e.conftest import exchange, local_llm, local_memory

pytestmark = pytest.mark.e2e

SCOPE = ("e2e", "reader")
MANUAL = """# Aurora kettle

The Aurora kettle boils a litre of water in three minutes.

## Cleaning

Descale the kettle once a month with white vinegar, then rinse it twice with clean water.
"""


def test_a_learned_document_is_extracted_and_answers_a_question(local_llm_url: str, tmp_path: Path) -> None:
    llm = local_llm(local_llm_url)
    started = time.monotonic()
    with local_memory(tmp_path / "store", llm) as m:
        m.add_session(
            SCOPE,
            exchange("I bought an Aurora kettle last week.", "Enjoy it! Tell me how it works out."),
            session_id="chat-1",
            date="2024-05-01T10:00:00",
        )
        learned = m.add_document(SCOPE, MANUAL, source="manuals/kettle.md", date="2024-05-02", extract=True)
        facts = m.facts(SCOPE)
        answer = m.answer(SCOPE, "How often should I descale my kettle?", question_date="2024-06-01")
        hits = m.search(SCOPE, "How often should I descale my kettle?", k=1, question_date="2024-06-01")
    elapsed = time.monotonic() - started
    print(f"\ntook {elapsed:.0f} s\n{learned}\nfacts: {[f.text for f in facts]}\nanswer: {answer.text!r}")
    print(f"citations: {[(c.hit_id, c.session_id) for c in answer.citations]}")
    assert learned.extraction is not None, learned
    assert (learned.extraction.sessions_done, learned.extraction.errors) == (1, {}), learned.extraction
    # Only the document was extracted (the chat was not asked to be): every fact cites its session.
    assert all(f.session_id == learned.session_id for f in facts), [f.session_id for f in facts]
    assert hits[0].document is not None and hits[0].document.title_path == ["Aurora kettle", "Cleaning"]
    assert not answer.abstained and "month" in answer.text.lower(), answer.text
