"""Extraction into the graph: facts, SVO events and entities from chat sessions, and fact versioning."""

from graphrecall.extract.extractor import ExtractionConfig, Extractor
from graphrecall.names import match_keys, normalize_name

__all__ = ["ExtractionConfig", "Extractor", "match_keys", "normalize_name"]
