"""Ranked lists of a fixed set of searches, dumped and compared: the check that a refactor changed no ranking.

``python -m benchmarks.rankings.dump`` fills scopes from the dev data (``scopes``) and writes every search's hits
(ids, scores, signals) to one JSON file; ``python -m benchmarks.rankings.compare BEFORE AFTER`` says whether two
dumps agree (ids exactly, scores and signals to a tolerance) and where they first differ (docs/benchmarks.md,
"Ranking identity").
"""
