"""Which sentence-transformers pipelines the ONNX exporter accepts (only what it reproduces exactly)."""

from __future__ import annotations

from typing import Any

import pytest

from graphrecall.embed.onnx import OnnxUnavailable, check_pipeline


class Transformer:
    pass


class Normalize:
    pass


class Dense:
    pass


class Pooling:
    def __init__(self, **config: Any) -> None:
        self.config = config

    def get_config_dict(self) -> dict[str, Any]:
        return self.config


@pytest.mark.parametrize(
    "modules",
    [
        [Transformer(), Pooling(pooling_mode="mean"), Normalize()],
        [Transformer(), Pooling(pooling_mode="mean")],
        [
            Transformer(),
            Pooling(pooling_mode_mean_tokens=True, pooling_mode_cls_token=False),
        ],  # older versions
    ],
)
def test_mean_pooled_transformers_are_accepted(modules: list[Any]) -> None:
    check_pipeline(modules)


@pytest.mark.parametrize(
    ("modules", "reason"),
    [
        ([Transformer(), Pooling(pooling_mode="cls"), Normalize()], "only mean pooling"),
        ([Transformer(), Pooling(pooling_mode_cls_token=True, pooling_mode_mean_tokens=True)], "only mean"),
        ([Transformer(), Pooling(pooling_mode="mean"), Dense(), Normalize()], "Dense"),
        ([Transformer()], "Transformer -> Pooling"),
    ],
)
def test_other_pipelines_are_refused_with_the_reason(modules: list[Any], reason: str) -> None:
    with pytest.raises(OnnxUnavailable, match=reason):
        check_pipeline(modules)
