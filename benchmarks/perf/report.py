"""perf.json -> perf.md (tables for docs/benchmarks.md) and latency.png (p50/p95 against store size)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

from benchmarks import provenance
from benchmarks.jsonfile import write_json, write_markdown
from benchmarks.provenance import Run

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TARGET_P50_MS = 30.0


def plot(res: dict[str, Any], out: Path) -> Path:
    ok = [s for s in res["sizes"] if "error" not in s]
    sizes = [s["rounds"] for s in ok]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode, style, label in (("index", "-", "HNSW index"), ("exact", "--", "exact scan (use_index=False)")):
        for pct, marker in (("p50_ms", "o"), ("p95_ms", "^")):
            ys = [s["latency"][mode][pct] for s in ok]
            ax.plot(sizes, ys, style, marker=marker, label=f"{label} {pct[:3]}")
    ax.axhline(TARGET_P50_MS, color="grey", linewidth=0.8, linestyle=":", label="target p50 (index, 100k)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rounds in one scope")
    ax.set_ylabel("search latency, ms (k=10, query embedding included)")
    ax.set_title("graphrecall search latency vs store size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out / "latency.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ingest(res: dict[str, Any]) -> list[str]:
    ing = res.get("ingest")
    if not ing:
        return []
    ratios = ", ".join(f"{p['ratio']:.3f}" for p in ing["pairs"])
    return [
        "## Ingest throughput (storage overhead)",
        "",
        f"{ing['sessions']} LongMemEval sessions, {ing['messages']} messages, {ing['rounds']} rounds, "
        f"{ing['texts_embedded']} texts embedded; uncached embedder on both sides, {len(ing['pairs'])} A/B pairs.",
        "",
        _row(["side", "messages/s (median)"]),
        _row(["---", "---"]),
        _row(["`Memory.add_sessions`", f"{ing['ingest_msgs_per_s']:.1f}"]),
        _row(["embedder alone, same texts", f"{ing['embed_alone_msgs_per_s']:.1f}"]),
        "",
        f"Ratio ours / embedder-alone: **{ing['ratio_median']:.3f}** (pairs: {ratios}; target >= "
        f"{ing['target_ratio']}). Median storage time (ingest minus embedding): "
        f"{ing['storage_overhead_s_median']:.2f} s.",
        "",
        f"Load-independent check, inside each ingest call: embedding time / ingest wall time = "
        f"**{ing.get('inner_ratio_median', float('nan')):.3f}** (median); time outside the embedder (validation, "
        f"round building, Kuzu writes and index maintenance): {ing.get('storage_s_inside_ingest_median', float('nan')):.2f} s "
        f"for {ing['rounds']} rounds.",
        "",
    ]


def _sizes(res: dict[str, Any]) -> list[str]:
    failed = [s for s in res.get("sizes", []) if "error" in s]
    sizes = [s for s in res.get("sizes", []) if "error" not in s]
    if not sizes and not failed:
        return []
    head = [
        "rounds",
        "index p50",
        "index p95",
        "exact p50",
        "exact p95",
        "HNSW recall@60",
        "build rounds/s",
        "disk MB",
        "bytes/round",
        "peak RSS MiB (build/search)",
    ]
    lines = [
        "## Search latency (k=10, no reranker, query embedding included)",
        "",
        _row(head),
        _row(["---"] * len(head)),
    ]
    for s in sizes:
        li, le = s["latency"]["index"], s["latency"]["exact"]
        recall = next(
            (v for k, v in s["hnsw_recall"].items() if k.startswith("recall_at_") and k != "recall_at_10"),
            0.0,
        )
        lines.append(
            _row(
                [
                    s["rounds"],
                    f"{li['p50_ms']:.1f}",
                    f"{li['p95_ms']:.1f}",
                    f"{le['p50_ms']:.1f}",
                    f"{le['p95_ms']:.1f}",
                    f"{recall:.3f}",
                    f"{s['build']['rounds_per_s']:.0f}",
                    f"{s['disk']['after_checkpoint_bytes'] / 1e6:.0f}",
                    f"{s['disk']['bytes_per_round']:.0f}",
                    f"{s['rss']['build_peak_mib']:.0f} / {s['rss']['search_peak_mib']:.0f}",
                ]
            )
        )
    names = sorted({n for s in sizes for m in s["breakdown"].values() for n in m})
    lines += [
        "",
        "Stage breakdown, p50 ms (timed inside retriever.search; store_sum = the database stages added up; "
        "stages run side by side on worker threads, so they can add up to more than total):",
        "",
        _row(["rounds", "path", *names]),
        _row(["---"] * (2 + len(names))),
    ]
    for s in sizes:
        for mode, st in s["breakdown"].items():
            lines.append(
                _row([s["rounds"], mode, *(f"{st[n]['p50_ms']:.1f}" if n in st else "" for n in names)])
            )
    lines += [
        "",
        "## Cold open vs warm search",
        "",
        _row(["rounds", "open ms", "open + first search ms", "warm search ms"]),
        _row(["---"] * 4),
    ]
    for s in sizes:
        c = s["cold"]
        lines.append(
            _row(
                [
                    s["rounds"],
                    f"{c['open_ms_median']:.0f}",
                    f"{c['open_plus_first_search_ms_median']:.0f}",
                    f"{c['warm_search_ms_median']:.0f}",
                ]
            )
        )
    for s in failed:
        lines.append(f"- {s['rounds']} rounds: search FAILED: {s['error']}")
    return [*lines, ""]


def _scopes(res: dict[str, Any]) -> list[str]:
    m = res.get("many_scopes")
    if not m:
        return []
    return [
        "## Many scopes in one process",
        "",
        f"{m['scopes']} scopes (one real session each), pool capacity {m['pool_capacity']}: "
        f"{m['round_robin_searches']} round-robin searches caused {m['round_robin_opens']} opens; pool-miss search "
        f"p50 {m['pool_miss_search']['p50_ms']:.0f} ms / p95 {m['pool_miss_search']['p95_ms']:.0f} ms; hot-set "
        f"searches p50 {m['pool_hit_search']['p50_ms']:.1f} ms with {m['hot_set_opens']} opens; at most "
        f"{m['max_open_databases']} databases open; {m['error_count']} errors; RSS {m['rss_mib_after']:.0f} MiB, "
        f"VMS {m['vms_gib_after']:.0f} GiB; disk {m['disk_mb_per_scope']:.1f} MB per scope. Creating a scope with "
        f"one session: p50 {m['create_scope_with_one_session_ms']['p50_ms']:.0f} ms.",
        "",
    ]


def _floor(res: dict[str, Any]) -> list[str]:
    f = res.get("disk_floor")
    if not f:
        return []
    n = f["ablation_sessions"]
    lines = [
        "## Disk floor",
        "",
        f"Just-created scope: {f['just_created']}; after CHECKPOINT: {f['after_checkpoint']} (bytes).",
        "",
        _row(["schema variant", "created MB", "after 1 session MB", f"after {n} sessions MB"]),
        _row(["---"] * 4),
    ]
    for name, v in f["ablation"].items():
        lines.append(
            _row(
                [
                    name,
                    f"{v['created_mb']:.1f}",
                    f"{v['after_1_session_mb']:.1f}",
                    f"{v[f'after_{n}_sessions_mb']:.1f}",
                ]
            )
        )
    return [*lines, ""]


def _memory(res: dict[str, Any]) -> list[str]:
    mem = res.get("memory", {})
    lines = [
        "## Memory",
        "",
        _row(["phase", "RSS start MiB", "RSS peak MiB", "seconds", "load avg at end"]),
        _row(["---"] * 5),
    ]
    for name, ph in mem.get("phases", {}).items():
        lines.append(
            _row(
                [
                    name,
                    f"{ph['rss_start_mib']:.0f}",
                    f"{ph['rss_peak_mib']:.0f}",
                    f"{ph['seconds']:.1f}",
                    f"{ph.get('loadavg_1min_end', float('nan')):.1f}",
                ]
            )
        )
    return [*lines, "", f"Process peak RSS (ru_maxrss): {mem.get('process_peak_mib', 0.0):.0f} MiB.", ""]


def markdown(res: dict[str, Any]) -> str:
    runs = res.get("runs", {})
    lines = ["# graphrecall perf benchmark", ""]
    for phase, info in runs.items():
        where = (
            provenance.markdown(info["run"])
            if "run" in info
            else f"(load average at start {info['machine']['loadavg_start']}, {info['machine']['cpus']} CPUs)"
        )
        lines.append(f"- {phase}: `{info['config']['command']}` — {where}")
    lines += [
        "",
        f"kuzu {res['machine']['kuzu']}, embedder `{res['config']['embedder']}` (backend "
        f"{res['config'].get('embed_backend', 'torch')}), torch threads {res['config'].get('torch_threads')}.",
        "",
    ]
    lines += _ingest(res) + _sizes(res) + _scopes(res) + _floor(res) + _memory(res)
    lines += ["## Method", "", res["method"], ""]
    return "\n".join(lines)


SECTIONS = ("ingest", "disk_floor", "base", "sizes", "many_scopes")


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with every section ``new`` measured replacing its counterpart (phases run separately combine)."""
    # "run" is the record of the run that writes the file (``write_all``); each phase keeps its own under "runs".
    out = {
        **{k: v for k, v in old.items() if k != "run"},
        **{k: v for k, v in new.items() if k not in ("runs", "memory", "run")},
    }
    out["runs"] = {**old.get("runs", {}), **new.get("runs", {})}
    om, nm = old.get("memory", {}), new.get("memory", {})
    out["memory"] = {
        "phases": {**om.get("phases", {}), **nm.get("phases", {})},
        "process_peak_mib": max(om.get("process_peak_mib", 0.0), nm.get("process_peak_mib", 0.0)),
    }
    return out


def write_all(res: dict[str, Any], out: Path, run: Run) -> list[Path]:
    """perf.json, perf.md and latency.png in ``out``; ``run``'s record goes into the first two."""
    paths = [write_json(out / "perf.json", res, run), write_markdown(out / "perf.md", markdown(res), run)]
    if res.get("sizes"):
        paths.append(plot(res, out))
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.perf.report",
        description="Re-render perf.md and latency.png from a perf.json (after a change to the report's layout), "
        "optionally merging the sections that other runs measured (phases run separately with --only).",
    )
    p.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("benchmarks/results/perf"),
        help="report directory holding perf.json (default: benchmarks/results/perf)",
    )
    p.add_argument("others", nargs="*", type=Path, help="other runs' report directories, merged in order")
    a = p.parse_args(argv)
    merged = json.loads((a.out / "perf.json").read_text())
    # The file-level record stays the measuring run's (each phase's own is under "runs"), not this re-rendering's.
    run = Run.recorded(merged.pop("run")) if "run" in merged else Run.begin()
    for other in a.others:
        merged = merge(merged, json.loads((other / "perf.json").read_text()))
    print(write_all(merged, a.out, run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
