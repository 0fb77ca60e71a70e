"""Properties of entity-name normalization (hypothesis) and the match keys built on it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graphrecall.extract.entities import types_compatible
from graphrecall.names import match_keys, normalize_name

names = st.text(max_size=40)
words = st.lists(
    st.sampled_from(["my", "the", "Ana", "sister", "Dr.", "rex", "O'Neil", "São", "ß", "  ", "!"]), max_size=6
)


@given(names)
def test_normalization_is_idempotent(name: str) -> None:
    once = normalize_name(name)
    assert normalize_name(once) == once


@given(
    st.lists(
        st.sampled_from(["Ana", "my", "SISTER", "the", "Rex", "dr", "São", "x1"]), min_size=1, max_size=5
    )
)
def test_case_and_whitespace_do_not_matter(tokens: list[str]) -> None:
    plain = " ".join(tokens)
    noisy = "  " + "\t ".join(t.swapcase() for t in tokens) + "\n"
    assert normalize_name(noisy) == normalize_name(plain)


@given(names.filter(lambda s: any(c.isalnum() for c in s)))
def test_never_empty_when_there_is_a_letter_or_digit(name: str) -> None:
    assert normalize_name(name) != ""


@given(names)
def test_output_is_lowercase_words_separated_by_single_spaces(name: str) -> None:
    out = normalize_name(name)
    assert out == " ".join(out.split())
    assert not any(c.isupper() for c in out)
    assert all(c.isalnum() or c == " " for c in out)


@given(words)
def test_leading_determiners_never_survive_unless_nothing_else_is_left(tokens: list[str]) -> None:
    out = normalize_name(" ".join(tokens)).split()
    stop = {"my", "the", "dr"}
    if any(normalize_name(t) not in stop and normalize_name(t) for t in tokens):
        assert not out or out[0] not in stop


def test_examples_of_the_same_entity() -> None:
    assert normalize_name("my sister Ana") == "sister ana"
    assert normalize_name("Ana's") == normalize_name("ana") == normalize_name("  ANA! ")
    assert normalize_name("Dr. Smith") == normalize_name("smith")
    assert normalize_name("The") == "the"  # a determiner alone is kept, not emptied
    assert "ana" in match_keys("my sister Ana") and match_keys("my sister") == {"sister"}


def test_type_compatibility() -> None:
    assert types_compatible("person", "person") and types_compatible("thing", "place")
    assert not types_compatible("person", "place")
