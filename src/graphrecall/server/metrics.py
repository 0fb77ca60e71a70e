"""Prometheus metrics in the text exposition format, written by hand (no prometheus_client dependency).

Labels are bounded on purpose: the route *template* (``/v1/scopes/{org}/{user}/search``), never the concrete path,
so user ids never reach the metrics store and the series count stays fixed however many tenants there are.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from graphrecall.embed.base import layers
from graphrecall.embed.batching import BatchingEmbedder
from graphrecall.models import IngestResult

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_INGEST_FIELDS = IngestResult.COUNTERS


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in kv.items()) + "}"


class Metrics:
    """Thread-safe counters and a latency histogram for one server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self._hist: dict[tuple[str, str], list[int]] = {}
        self._hist_sum: defaultdict[tuple[str, str], float] = defaultdict(float)
        self._hist_count: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._ingest: defaultdict[str, int] = defaultdict(int)
        self._auth_failures: defaultdict[str, int] = defaultdict(int)
        self.in_flight = 0

    def request_started(self) -> None:
        with self._lock:
            self.in_flight += 1

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route)
        with self._lock:
            self.in_flight -= 1
            self._requests[(method, route, str(status))] += 1
            buckets = self._hist.setdefault(key, [0] * len(BUCKETS))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1
            self._hist_sum[key] += seconds
            self._hist_count[key] += 1

    def ingest(self, result: IngestResult) -> None:
        with self._lock:
            for name in _INGEST_FIELDS:
                self._ingest[name] += getattr(result, name)

    def auth_failure(self, reason: str) -> None:
        with self._lock:
            self._auth_failures[reason] += 1

    def render(self) -> str:
        """The whole registry in Prometheus text format 0.0.4."""
        with self._lock:
            out = [
                "# HELP graphrecall_http_requests_total HTTP requests by method, route template and status.",
                "# TYPE graphrecall_http_requests_total counter",
            ]
            for (method, route, status), n in sorted(self._requests.items()):
                out.append(
                    f"graphrecall_http_requests_total{_labels(method=method, route=route, status=status)} {n}"
                )
            out += [
                "# HELP graphrecall_http_request_duration_seconds Request latency by method and route template.",
                "# TYPE graphrecall_http_request_duration_seconds histogram",
            ]
            for (method, route), buckets in sorted(self._hist.items()):
                for bound, n in zip(BUCKETS, buckets, strict=True):
                    lab = _labels(method=method, route=route, le=repr(bound))
                    out.append(f"graphrecall_http_request_duration_seconds_bucket{lab} {n}")
                count = self._hist_count[(method, route)]
                lab = _labels(method=method, route=route, le="+Inf")
                out.append(f"graphrecall_http_request_duration_seconds_bucket{lab} {count}")
                lab = _labels(method=method, route=route)
                out.append(
                    f"graphrecall_http_request_duration_seconds_sum{lab} {self._hist_sum[(method, route)]}"
                )
                out.append(f"graphrecall_http_request_duration_seconds_count{lab} {count}")
            out += [
                "# HELP graphrecall_http_requests_in_flight Requests being handled now.",
                "# TYPE graphrecall_http_requests_in_flight gauge",
                f"graphrecall_http_requests_in_flight {self.in_flight}",
            ]
            for name in _INGEST_FIELDS:
                metric = f"graphrecall_ingest_{name}_total"
                out += [
                    f"# HELP {metric} Ingest through the HTTP API: {name.replace('_', ' ')}.",
                    f"# TYPE {metric} counter",
                    f"{metric} {self._ingest[name]}",
                ]
            out += [
                "# HELP graphrecall_auth_failures_total Rejected requests by reason (unauthorized, forbidden).",
                "# TYPE graphrecall_auth_failures_total counter",
            ]
            for reason, n in sorted(self._auth_failures.items()):
                out.append(f"graphrecall_auth_failures_total{_labels(reason=reason)} {n}")
            return "\n".join(out) + "\n"


def batching_lines(embedder: object) -> str:
    """The embedding micro-batcher's counters (``embed.batching``), found through wrappers such as
    ``CachedEmbedder``; empty when the embedder has none. Texts per call is how much batching the load gave."""
    for layer in layers(embedder):
        if isinstance(layer, BatchingEmbedder):
            out = [
                "# HELP graphrecall_embed_batches_total Model calls made by the embedding micro-batcher.",
                "# TYPE graphrecall_embed_batches_total counter",
                f"graphrecall_embed_batches_total {layer.calls}",
                "# HELP graphrecall_embed_batched_texts_total Texts embedded in those calls.",
                "# TYPE graphrecall_embed_batched_texts_total counter",
                f"graphrecall_embed_batched_texts_total {layer.texts}",
            ]
            return "\n".join(out) + "\n"
    return ""
