"""Usage and cost accounting: what a run cost, in total, per model and per purpose."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graphrecall.llm import ScriptedLLM, Usage, UsageTracker, usage_purpose
from graphrecall.llm.usage import cost_usd, price_for


def test_prices_match_dated_model_names_by_longest_prefix() -> None:
    assert price_for("gpt-4o-mini-2024-07-18") == price_for("gpt-4o-mini") != price_for("gpt-4o")
    assert price_for("claude-3-5-haiku-latest") == (0.80, 4.00)
    assert price_for("qwen2.5-coder-1.5b") == (0.0, 0.0)


def test_cost_is_per_million_tokens() -> None:
    assert cost_usd("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.15 + 0.60)
    assert cost_usd("local-model", 10**9, 10**9) == 0.0


def test_tracker_totals_records_and_reset() -> None:
    tracker = UsageTracker()
    tracker.record(model="gpt-4o", input_tokens=1000, output_tokens=100, latency_s=0.5, purpose="extract")
    tracker.record(model="gpt-4o", input_tokens=500, output_tokens=50, latency_s=0.2, purpose="read")

    total = tracker.total
    assert (total.input_tokens, total.output_tokens, total.calls) == (1500, 150, 2)
    assert total.cost_usd == pytest.approx((1500 * 2.5 + 150 * 10) / 1e6)
    assert set(tracker.by_purpose()) == {"extract", "read"}
    assert tracker.by_model()["gpt-4o"].calls == 2
    assert [r.latency_s for r in tracker.records] == [0.5, 0.2]

    tracker.reset()
    assert tracker.total == Usage()


def test_a_tracker_keeps_its_newest_records_and_counts_every_call() -> None:
    """A server's tracker lives as long as the process: it keeps the newest ``keep`` records, and its totals and
    ``since`` marks still count every call."""
    tracker = UsageTracker(keep=3)
    for i in range(5):
        tracker.record(model="m", input_tokens=10 * i, output_tokens=1, latency_s=0.1, purpose=f"p{i % 2}")
    assert [r.input_tokens for r in tracker.records] == [20, 30, 40]
    assert tracker.calls == 5 and tracker.total.calls == 5 and tracker.total.input_tokens == 100
    assert {k: u.calls for k, u in tracker.by_purpose().items()} == {"p0": 3, "p1": 2}
    mark = tracker.calls
    assert tracker.since(mark) == []
    tracker.record(model="m", input_tokens=7, output_tokens=1, latency_s=0.1)
    assert [r.input_tokens for r in tracker.since(mark)] == [7]
    assert [r.input_tokens for r in tracker.since(0)] == [30, 40, 7]  # the older ones are gone
    tracker.reset()
    assert tracker.calls == 0 and tracker.records == [] and tracker.by_model() == {}


def test_custom_price_table() -> None:
    tracker = UsageTracker(prices={"mine": (1.0, 2.0)})
    rec = tracker.record(model="mine-v2", input_tokens=10**6, output_tokens=10**6, latency_s=0)

    assert rec.cost_usd == pytest.approx(3.0)


async def test_every_call_is_recorded_with_its_purpose() -> None:
    llm = ScriptedLLM([(None, "a")] * 3, model="gpt-4o-mini")

    await llm.complete("x" * 4000, purpose="explicit")
    with usage_purpose("extract"):
        await llm.complete("y")
    await llm.complete("z")

    assert [r.purpose for r in llm.usage.records] == ["explicit", "extract", ""]
    assert llm.usage.total.calls == 3
    assert llm.usage.total.cost_usd > 0  # priced as gpt-4o-mini
    assert llm.usage.records[0].input_tokens >= 1000


async def test_a_shared_tracker_sums_several_models() -> None:
    tracker = UsageTracker()
    a = ScriptedLLM([(None, "a")], model="a", usage=tracker)
    b = ScriptedLLM([(None, "b")], model="b", usage=tracker)

    await asyncio.gather(a.complete("1"), b.complete("2"))

    assert tracker.total.calls == 2
    assert set(tracker.by_model()) == {"a", "b"}


def test_recording_is_thread_safe() -> None:
    tracker = UsageTracker()

    def work() -> None:
        for _ in range(500):
            tracker.record(model="m", input_tokens=1, output_tokens=1, latency_s=0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert tracker.total.calls == 2000
    assert tracker.total.input_tokens == 2000
