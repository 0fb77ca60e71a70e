"""The Reader's paths, each driven by a ScriptedLLM over a real (hashing-embedder) memory: abstain on NO, answer
with citations on YES, exactly one extra retrieval on PARTIAL, every tool, tool errors fed back, the step bound,
the text protocol (and the automatic switch to it), and synthesis."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime

import pytest

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.llm import LLMError, ScriptedLLM, Step, ToolCall
from graphrecall.models import Hit, HitKind, TimeRange
from graphrecall.read import Reader
from graphrecall.recall import ScopeRecall

QD = datetime(2024, 4, 20, 12, 0)
SESSIONS = [
    ("s1", "2024-03-01T10:00:00", "I adopted a beagle puppy named Rex today.", "Congratulations on Rex!"),
    ("s2", "2024-03-10T09:00:00", "I moved to Lisbon for a new job at a bakery.", "Good luck in Lisbon!"),
    (
        "s3",
        "2024-04-02T18:00:00",
        "I love spicy Thai food and I hate mushrooms.",
        "Noted, spicy and no mushrooms.",
    ),
]


class CountingAccess:
    """The memory's own view of the scope (``Memory.recall``), recording every search query so tests can count
    retrievals."""

    def __init__(self, view: ScopeRecall) -> None:
        self.view = view
        self.queries: list[str] = []
        self.question_date = view.question_date
        self.rounds_between = view.rounds_between
        self.events_between = view.events_between
        self.facts = view.facts

    @property
    def has_extracted(self) -> bool:
        return self.view.has_extracted

    def search(
        self, query: str, k: int, *, kinds: Sequence[HitKind] = ("round",),
        time_range: TimeRange | None = None,
    ) -> list[Hit]:  # fmt: skip
        self.queries.append(query)
        return self.view.search(query, k, kinds=kinds, time_range=time_range)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, Scope]]:
    """One small memory shared by the module's tests (they only read it): building a store takes seconds."""
    root = tmp_path_factory.mktemp("reader") / "store"
    scope = Scope(org_id="acme", user_id="alice")
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as mem:
        for sid, date, user, reply in SESSIONS:
            mem.add_session(
                scope, [{"role": "user", "content": user}, {"role": "assistant", "content": reply}],
                session_id=sid, date=date,
            )  # fmt: skip
        yield mem, scope


@pytest.fixture
def access(stored: tuple[Memory, Scope]) -> CountingAccess:
    mem, scope = stored
    return CountingAccess(mem.recall(scope, QD))


def verdict(v: str, missing: str = "", ids: list[str] | None = None) -> Step:
    return Step("Retrieved memory", {"verdict": v, "missing": missing, "evidence_ids": ids or []})


def tool_messages(llm: ScriptedLLM, call_no: int) -> list[str]:
    return [m.content for m in llm.calls[call_no].messages if m.role == "tool"]


def test_no_verdict_abstains_without_reading(access: CountingAccess) -> None:
    llm = ScriptedLLM([verdict("NO", "the user's favourite opera")])
    ans = Reader(llm, "recall").answer(access, "What is my favourite opera?")
    llm.assert_done()
    assert ans.abstained and ans.verdict == "NO"
    assert ans.text.startswith("I don't know")
    assert "favourite opera" in ans.text
    assert ans.citations == []
    assert [c.kind for c in llm.calls] == ["parse"]


def test_yes_verdict_answers_with_notes_and_citations_anchored_on_question_date(
    access: CountingAccess,
) -> None:
    llm = ScriptedLLM(
        [
            verdict("YES", ids=["s1@0"]),
            Step(
                "Memory excerpts",
                "NOTES:\n[s1@0] (2024-03-01) adopted Rex\nANSWER: Rex, a beagle.\nEVIDENCE: [s1@0]",
            ),
        ]
    )
    ans = Reader(llm, "recall").answer(access, "What is my dog's name?")
    llm.assert_done()
    assert ans.text == "Rex, a beagle."
    assert not ans.abstained and ans.verdict == "YES"
    assert "adopted Rex" in ans.notes
    [cite] = ans.citations
    assert (cite.hit_id, cite.session_id, cite.date) == ("s1@0", "s1", datetime(2024, 3, 1, 10, 0))
    assert "beagle" in cite.snippet
    read = llm.calls[1]
    assert "2024-04-20" in read.prompt and "[s1@0]" in read.prompt
    assert {t.name for t in read.tools} == {
        "search_memory",
        "timeline",
        "date_math",
        "current_facts",
        "read_round",
    }
    assert ans.stages["verify"].usage.calls == 1 and ans.stages["read"].usage.calls == 1
    assert ans.usage.calls == 2


def test_partial_verdict_runs_exactly_one_targeted_retrieval(access: CountingAccess) -> None:
    llm = ScriptedLLM(
        [
            verdict("PARTIAL", "city the user moved to"),
            Step("Memory excerpts", "ANSWER: Lisbon\nEVIDENCE: [s2@0]"),
        ]
    )
    reader = Reader(llm, "recall")
    searches_before = len(access.queries)
    ans = reader.answer(access, "Which city did I move to for work, and what is my dog called?")
    first_pass = len(ans.sub_questions) + 1
    assert access.queries[searches_before + first_pass :] == ["city the user moved to"]
    assert ans.retrieval_queries[-1] == "city the user moved to"
    assert ans.verdict == "PARTIAL" and ans.text == "Lisbon"
    assert [c.hit_id for c in ans.citations] == ["s2@0"]
    llm.assert_done()


def test_every_tool_runs_and_its_result_goes_back_to_the_model(access: CountingAccess) -> None:
    calls = [
        ToolCall(id="c1", name="search_memory", arguments={"query": "beagle puppy", "k": 2}),
        ToolCall(id="c2", name="date_math", arguments={"op": "days_between", "date": "2024-03-01", "other_date": "2024-03-10"}),
        ToolCall(id="c3", name="timeline", arguments={"start": "2024-03-01", "end": "2024-03-31"}),
        ToolCall(id="c4", name="current_facts", arguments={"query": "food"}),
    ]  # fmt: skip
    llm = ScriptedLLM(
        [verdict("YES"), Step(None, calls), Step(None, "ANSWER: 9 days\nEVIDENCE: [s1@0], [s2@0]")]
    )
    ans = Reader(llm, "recall").answer(access, "How many days after adopting Rex did I move to Lisbon?")
    llm.assert_done()
    assert [t.name for t in ans.tool_trace] == ["search_memory", "date_math", "timeline", "current_facts"]
    assert all(t.error is None for t in ans.tool_trace)
    results = [json.loads(c) for c in tool_messages(llm, 2)]
    assert results[0]["results"][0]["id"] == "s1@0"
    assert results[1]["days"] == 9
    assert (results[2]["round_count"], results[2]["session_count"]) == (2, 2)
    assert "no extracted facts" in results[3]["source"]
    assert ans.text == "9 days" and {c.hit_id for c in ans.citations} == {"s1@0", "s2@0"}
    assert ans.stages["tools"].latency_s > 0


def test_tool_errors_are_fed_back_and_the_loop_continues(access: CountingAccess) -> None:
    calls = [
        ToolCall(id="e1", name="date_math", arguments={"op": "days_between", "date": "the day Rex came"}),
        ToolCall(id="e2", name="teleport", arguments={}),
    ]
    llm = ScriptedLLM([verdict("YES"), Step(None, calls), Step(None, "ANSWER: Rex")])
    ans = Reader(llm, "recall").answer(access, "What is my dog's name?")
    errors = [t.error for t in ans.tool_trace]
    assert errors[0] is not None and "not a date" in errors[0]
    assert errors[1] is not None and "unknown tool" in errors[1]
    fed_back = [json.loads(c)["error"] for c in tool_messages(llm, 2)]
    assert fed_back == errors
    assert ans.text == "Rex"


def test_step_bound_ends_the_loop_with_a_tool_free_final_call(access: CountingAccess) -> None:
    again = ToolCall(id="x", name="search_memory", arguments={"query": "dog"})
    llm = ScriptedLLM(
        [
            verdict("YES"),
            Step(None, again),
            Step(None, again),
            Step("all 2 rounds of tool calls", "ANSWER: Rex"),
        ]
    )
    ans = Reader(llm, "recall", max_tool_steps=2).answer(access, "What is my dog's name?")
    llm.assert_done()
    assert len(ans.tool_trace) == 2
    assert [len(c.tools) > 0 for c in llm.calls[1:]] == [True, True, False]
    assert ans.stopped_by_step_limit and ans.text == "Rex"


def test_a_model_that_ignores_the_bound_still_yields_the_best_prose_so_far(access: CountingAccess) -> None:
    call = '{"tool": "search_memory", "arguments": {"query": "dog"}}'
    llm = ScriptedLLM([verdict("YES"), Step(None, f"Probably Rex. {call}"), Step(None, call)])
    ans = Reader(llm, "recall", max_tool_steps=1).answer(access, "What is my dog's name?")
    assert ans.stopped_by_step_limit and ans.text == "Probably Rex."


def test_text_protocol_for_models_without_native_tools(access: CountingAccess) -> None:
    llm = ScriptedLLM(
        [
            verdict("YES"),
            Step(None, 'I will compute it.\n```json\n{"tool": "date_math", "arguments": {"op": "weekday", "date": "2024-03-01"}}\n```'),
            Step("Result of date_math", "ANSWER: It was a Friday."),
        ]
    )  # fmt: skip
    ans = Reader(llm, "recall", tools="text").answer(access, "On which weekday did I adopt Rex?")
    llm.assert_done()
    assert all(c.tools == [] for c in llm.calls)
    assert '"tool": "<name>"' in llm.calls[1].messages[0].content
    [trace] = ans.tool_trace
    assert (trace.protocol, trace.error) == ("text", None)
    assert '"Friday"' in llm.calls[2].last_user
    assert ans.text == "It was a Friday."


def test_auto_switches_to_the_text_protocol_when_native_tools_are_rejected(access: CountingAccess) -> None:
    llm = ScriptedLLM(
        [
            verdict("YES"),
            Step(None, LLMError("tools are not supported", status=500)),
            Step(None, "ANSWER: Rex"),
        ]
    )
    ans = Reader(llm, "recall").answer(access, "What is my dog's name?")
    llm.assert_done()
    assert llm.calls[1].tools and not llm.calls[2].tools
    assert '"tool": "<name>"' in llm.calls[2].messages[0].content
    assert ans.text == "Rex"


def test_other_llm_errors_propagate(access: CountingAccess) -> None:
    llm = ScriptedLLM([verdict("YES"), Step(None, LLMError("unauthorised", status=401))])
    with pytest.raises(LLMError, match="unauthorised"):
        Reader(llm, "recall").answer(access, "What is my dog's name?")


def test_an_unusable_verifier_output_does_not_silence_the_reader(access: CountingAccess) -> None:
    llm = ScriptedLLM(
        [Step("Retrieved memory", "no idea"), Step(None, "still no idea"), Step(None, "ANSWER: Rex")]
    )
    ans = Reader(llm, "recall").answer(access, "What is my dog's name?")
    assert ans.verdict is None and "verifier output unusable" in ans.missing
    assert ans.text == "Rex"


def test_an_i_dont_know_answer_counts_as_abstention(access: CountingAccess) -> None:
    llm = ScriptedLLM([verdict("YES"), Step(None, "ANSWER: I don't know: the excerpts never name it.")])
    ans = Reader(llm, "recall").answer(access, "What is my cat's name?")
    assert ans.abstained and ans.citations == []


def test_synthesis_uses_the_users_own_words_and_names_the_preferences(access: CountingAccess) -> None:
    reply = (
        "PREFERENCES:\n- loves spicy Thai food [s3@0]\n- hates mushrooms [s3@0]\n"
        "ANSWER: Try a spicy green curry without mushrooms.\nEVIDENCE: [s3@0]"
    )
    llm = ScriptedLLM([Step("personalised answer", reply)])
    ans = Reader(llm, "synthesis").answer(access, "Can you suggest a dinner recipe for tonight?")
    llm.assert_done()
    assert [c.kind for c in llm.calls] == ["complete"]  # no verifier gate
    assert ans.mode == "synthesis" and ans.verdict is None and not ans.abstained
    assert ans.preferences == ["loves spicy Thai food [s3@0]", "hates mushrooms [s3@0]"]
    assert ans.text == "Try a spicy green curry without mushrooms."
    assert [c.hit_id for c in ans.citations] == ["s3@0"]
    prompt = llm.calls[0].last_user
    entry = prompt[prompt.index("[s3@0]") :]
    assert entry.index("user: I love spicy Thai food") < entry.index("(assistant: Noted")


def test_auto_mode_follows_the_classifier(access: CountingAccess) -> None:
    llm = ScriptedLLM([Step("personalised answer", "ANSWER: Thai green curry.")])
    ans = Reader(llm).answer(access, "Can you recommend some dinner ideas for me?")
    assert ans.mode == "synthesis" and ans.question_type == "single-session-preference"


def test_zero_tool_steps_offers_no_tools(access: CountingAccess) -> None:
    llm = ScriptedLLM([verdict("YES"), Step(None, "ANSWER: Rex")])
    Reader(llm, "recall", max_tool_steps=0).answer(access, "What is my dog's name?")
    assert llm.calls[1].tools == [] and "JSON object of this form" not in llm.calls[1].prompt


def test_an_event_anchor_is_resolved_through_retrieval(access: CountingAccess) -> None:
    llm = ScriptedLLM([verdict("YES"), Step("2024-03-12 .. 2024-03-18", "ANSWER: You moved to Lisbon.")])
    ans = Reader(llm, "recall").answer(access, "What did I do two weeks after I adopted Rex?")
    assert "I adopted Rex" in access.queries
    assert ans.time_range == "2024-03-12..2024-03-18"
    llm.assert_done()
