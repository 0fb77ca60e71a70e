"""The structured-output models keep valid items and say why the others were dropped."""

from __future__ import annotations

from graphrecall.extract.schema import EntityMatch, SessionExtraction, VersionDecisions
from graphrecall.llm.base import validate_json
from graphrecall.models import FactKind


def test_invalid_items_are_dropped_with_their_path_and_the_rest_kept() -> None:
    s = SessionExtraction.model_validate(
        {
            "facts": [
                {"text": "The user likes tea", "kind": "Preference", "message_ids": "m1, m2"},
                {"text": ""},
            ],
            "events": [{"verb": "go", "text": "went"}],
            "entities": "Ana",
        }
    )
    assert [f.text for f in s.facts] == ["The user likes tea"]
    assert s.facts[0].kind is FactKind.preference and s.facts[0].message_ids == ["m1", "m2"]
    assert s.events == [] and s.entities == [] and s.relations == []
    assert len(s.dropped) == 3
    assert any(d.startswith("facts[1].text") for d in s.dropped)
    assert any(d.startswith("events[0].subject") for d in s.dropped)
    assert any(d.startswith("entities: expected a list") for d in s.dropped)


def test_unknown_kind_becomes_other_and_confidence_is_bounded() -> None:
    s = SessionExtraction.model_validate(
        {
            "facts": [
                {"text": "The user is tall", "kind": "physique"},
                {"text": "The user is 2m", "confidence": 3},
            ]
        }
    )
    assert [f.kind for f in s.facts] == [FactKind.other]
    assert len(s.dropped) == 1 and "confidence" in s.dropped[0]


def test_parsing_through_the_llm_layer_keeps_the_leniency() -> None:
    s = validate_json(SessionExtraction, '```json\n{"facts": [{"text": "ok fact"}, {"text": 5}]}\n```')
    assert [f.text for f in s.facts] == ["ok fact"] and len(s.dropped) == 1


def test_decisions_and_matches_accept_common_spellings() -> None:
    d = VersionDecisions.model_validate(
        {
            "decisions": [
                {"fact": "n1", "decision": "update", "target": "null"},
                {"fact": "n2", "decision": "MAYBE"},
            ]
        }
    )
    assert [(x.decision, x.target) for x in d.decisions] == [("UPDATE", None)] and len(d.dropped) == 1
    assert EntityMatch.model_validate({"match": "None"}).match is None
