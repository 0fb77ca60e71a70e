"""Extraction into the graph: facts, SVO events and entities from chat sessions, and fact versioning."""

from graphrecall.extract.entities import match_keys, normalize_name
from graphrecall.extract.extractor import ExtractionConfig, Extractor

__all__ = ["ExtractionConfig", "Extractor", "match_keys", "normalize_name"]
