"""Speed and scale benchmarks: ingest overhead, search latency by store size, memory, disk, cold opens.

Entry point: ``python -m benchmarks.perf.run``. Results go to ``benchmarks/results/perf/``.
"""
