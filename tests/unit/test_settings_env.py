"""Settings from the environment: a bad value is a configuration error naming the variable, never a traceback."""

from __future__ import annotations

import pytest

from graphrecall.config import Settings
from graphrecall.errors import ConfigurationError


def test_numbers_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_POOL_SIZE", "8")
    monkeypatch.setenv("GRAPHRECALL_FLUSH_MAX_AGE_S", "2.5")
    monkeypatch.setenv("GRAPHRECALL_RESIDENT_ROUNDS", "0")
    monkeypatch.setenv("GRAPHRECALL_FLUSH_CONCURRENCY", "3")
    monkeypatch.setenv("GRAPHRECALL_PASSAGE_FROM_CHARS", "1000")
    monkeypatch.setenv("GRAPHRECALL_COMPACT_FREE_FRACTION", "0.6")
    s = Settings.from_env()
    assert (s.pool_size, s.flush_max_age_s, s.resident_rounds, s.flush_concurrency) == (8, 2.5, 0, 3)
    assert (s.passage_from_chars, s.compact_free_fraction) == (1000, 0.6)


def test_flushes_take_half_the_cores_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRECALL_FLUSH_CONCURRENCY", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert Settings.from_env().flush_concurrency == 4
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert Settings.from_env().flush_concurrency == 1


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("GRAPHRECALL_RESIDENT_ROUNDS", "abc", "not a whole number"),
        ("GRAPHRECALL_POOL_SIZE", "2.5", "not a whole number"),
        ("GRAPHRECALL_FLUSH_MAX_AGE_S", "soon", "not a number"),
        ("GRAPHRECALL_POOL_SIZE", "0", "greater than or equal to 1"),
        ("GRAPHRECALL_RESIDENT_ROUNDS", "-1", "greater than or equal to 0"),
        ("GRAPHRECALL_FLUSH_CONCURRENCY", "0", "greater than or equal to 1"),
        ("GRAPHRECALL_PASSAGE_FROM_CHARS", "-5", "greater than or equal to 0"),
        ("GRAPHRECALL_PASSAGE_FROM_CHARS", "long", "not a whole number"),
        ("GRAPHRECALL_COMPACT_FREE_FRACTION", "0", "greater than 0"),
        ("GRAPHRECALL_COMPACT_FREE_FRACTION", "half", "not a number"),
    ],
)
def test_a_bad_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, says: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigurationError, match=says) as info:
        Settings.from_env()
    assert info.value.where == var
