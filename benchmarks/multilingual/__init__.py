"""Multilingual retrieval benchmark: hand-written histories in six languages, questions in the same or another."""
