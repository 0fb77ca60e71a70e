"""Turn-write p50 and search p50 of two checkouts, measured in one run, as ratios.

Why: the machine is shared and its load moves a latency more than most changes, so two figures taken at different
times do not compare. Each round of this benchmark runs the same workload once per checkout, one after the other, in
a fresh process whose ``PYTHONPATH`` points at that checkout's ``src`` (the public API only, so any version
runs it): a scope bulk-ingested with ``--rounds`` rounds and flushed, then ``--turns`` single-turn writes (each
acknowledged through the write log) and ``--queries`` searches, on the hashing embedder; then ``--extracted``
users of 20 rounds extracted by a scripted model, searched in turn (where the graph lists read Kuzu). The report gives each
checkout's p50s per round and the ratio of their medians over the rounds (candidate / base).

    python -m benchmarks.perf.ab_checkouts --base /path/to/main --candidate . --repeats 3 --out benchmarks/results/ab
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run

CHILD = textwrap.dedent(
    r"""
    import json, statistics, sys, tempfile, time
    from pathlib import Path
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder

    rounds, turns, queries, extracted = (int(x) for x in sys.argv[1:5])
    scope = Scope(org_id="bench", user_id="u")
    words = ["bakery", "rye", "dog", "Lisbon", "cello", "boiler", "marathon", "Rust", "beagle", "Porto"]

    def turn(i):
        w = words[i % len(words)]
        return [{"role": "user", "content": f"Turn {i}: today I talked about {w} number {i} and more."},
                {"role": "assistant", "content": f"Noted {w} {i}."}]

    with tempfile.TemporaryDirectory() as tmp, Memory.open(Path(tmp), embedder=HashingEmbedder(384)) as m:
        sessions = [{"session_id": f"s{i}", "date": f"2024-01-{1 + i % 28:02d}", "messages": turn(i)}
                    for i in range(rounds)]
        for start in range(0, rounds, 500):
            m.add_sessions(scope, sessions[start:start + 500])
        m.flush()
        m.search(scope, "warm up", 10)
        writes = []
        for i in range(turns):
            t = time.perf_counter()
            m.add_session(scope, turn(rounds + i), session_id=f"t{i}")
            writes.append((time.perf_counter() - t) * 1000)
        searches = []
        for i in range(queries):
            t = time.perf_counter()
            m.search(scope, f"what did I say about {words[i % len(words)]} number {i}?", 10)
            searches.append((time.perf_counter() - t) * 1000)
    # Extracted users (scripted model): search where the graph lists read Kuzu (facts, events, entities).
    import re
    from graphrecall.extract import ExtractionConfig
    from graphrecall.llm import ScriptedLLM, Step

    def extract(messages):
        text = chr(10).join(m.content for m in messages)
        ids = sorted(set(re.findall(r"\bm\d+\b", text)))[:1] or ["m1"]
        return {"facts": [{"text": "The user buys rye at the bakery.", "kind": "preference", "message_ids": ids,
                           "about": ["Rex"]}],
                "events": [{"subject": "user", "verb": "walk", "object": "Rex", "text": "The user walked Rex.",
                            "message_ids": ids}],
                "entities": [{"name": "Rex", "type": "animal", "aliases": []}], "relations": []}

    def versions(messages):
        labels = sorted(set(re.findall(r"\bn\d+\b", "\n".join(m.content for m in messages))))
        return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "ab"} for n in labels]}

    llm = ScriptedLLM([Step("Extract four lists", extract), Step("New facts, each followed", versions)], ordered=False)
    graph = []
    with tempfile.TemporaryDirectory() as tmp, Memory.open(Path(tmp), embedder=HashingEmbedder(384), llm=llm,
                                                          extraction=ExtractionConfig(background=False)) as m:
        users = [Scope(org_id="bench", user_id=f"x{i}") for i in range(extracted)]
        for u in users:
            m.add_sessions(u, [{"session_id": f"s{i}", "date": f"2024-01-{1 + i:02d}",
                                "messages": [t for j in range(5) for t in turn(5 * i + j)]} for i in range(4)])
            m.extract(u)
        for u in users:
            m.search(u, "warm up Rex", 10)
        for i in range(queries):
            u = users[i % len(users)]
            t = time.perf_counter()
            m.search(u, f"where does the user buy rye, and what about Rex {i}?", 10)
            graph.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"write_p50_ms": statistics.median(writes), "search_p50_ms": statistics.median(searches),
                      "extracted_search_p50_ms": statistics.median(graph)}))
    """
)


def measure(checkout: Path, rounds: int, turns: int, queries: int, extracted: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(rounds), str(turns), str(queries), str(extracted)],
        env=env, capture_output=True, text=True, check=True, cwd=checkout,
    )  # fmt: skip
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="the reference checkout (e.g. main)")
    ap.add_argument("--candidate", type=Path, default=Path("."), help="the checkout measured against it")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--extracted", type=int, default=20, help="extracted users of 20 rounds, searched in turn"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ab_checkouts"))
    a = ap.parse_args()
    run = Run.begin()
    rows: list[dict[str, Any]] = []
    for i in range(a.repeats):
        for name, checkout in (("base", a.base), ("candidate", a.candidate)):
            r = measure(checkout.resolve(), a.rounds, a.turns, a.queries, a.extracted)
            rows.append({"repeat": i, "checkout": name, **r})
            print(rows[-1], flush=True)

    def med(name: str, key: str) -> float:
        return float(statistics.median(r[key] for r in rows if r["checkout"] == name))

    keys = ("write_p50_ms", "search_p50_ms", "extracted_search_p50_ms")
    ratios = {k: med("candidate", k) / med("base", k) for k in keys}
    result = {"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows, "ratios": ratios}
    lines = [
        "| repeat | checkout | turn write p50 | search p50 | search p50, extracted users |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['repeat']} | {r['checkout']} | {r['write_p50_ms']:.1f} ms | {r['search_p50_ms']:.1f} ms | "
        f"{r['extracted_search_p50_ms']:.1f} ms |"
        for r in rows
    ]
    lines += [
        "",
        f"candidate / base, medians over the repeats: turn write {ratios['write_p50_ms']:.2f}x, search "
        f"{ratios['search_p50_ms']:.2f}x, search of extracted users {ratios['extracted_search_p50_ms']:.2f}x",
    ]
    save_report(a.out, "ab_checkouts", result, "\n".join(lines), run)


if __name__ == "__main__":
    main()
