"""Benchmarks: reproducible measurements of graphrecall on public datasets (run as ``python -m benchmarks...``)."""
