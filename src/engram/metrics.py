"""Process metrics in Prometheus' text format, with no client library: request latency histograms
per route, LLM calls, errors and tokens. Operation counts come from the database at scrape time."""

from __future__ import annotations

import threading
from collections import defaultdict

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latency: dict[tuple[str, str, str], list[float]] = {}
        self._latency_sum: dict[tuple[str, str, str], float] = defaultdict(float)
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        with self._lock:
            counts = self._latency.setdefault(key, [0.0] * (len(BUCKETS) + 1))
            for index, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[index] += 1
            counts[-1] += 1
            self._latency_sum[key] += seconds

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        with self._lock:
            self._counters[(name, tuple(sorted(labels.items())))] += value

    def render(self, extra: list[str] | None = None) -> str:
        lines = ["# HELP engram_http_request_duration_seconds HTTP request latency by route",
                 "# TYPE engram_http_request_duration_seconds histogram"]
        with self._lock:
            for (method, route, status), counts in sorted(self._latency.items()):
                labels = f'method="{method}",route="{_escape(route)}",status="{status}"'
                for bound, count in zip(BUCKETS, counts):
                    lines.append(f'engram_http_request_duration_seconds_bucket{{{labels},le="{bound}"}} {count:g}')
                lines.append(f'engram_http_request_duration_seconds_bucket{{{labels},le="+Inf"}} {counts[-1]:g}')
                lines.append(f"engram_http_request_duration_seconds_sum{{{labels}}} "
                             f"{self._latency_sum[(method, route, status)]:.6f}")
                lines.append(f"engram_http_request_duration_seconds_count{{{labels}}} {counts[-1]:g}")
            names = sorted({name for name, _ in self._counters})
            for name in names:
                lines.append(f"# TYPE {name} counter")
                for (metric, labels), value in sorted(self._counters.items()):
                    if metric == name:
                        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                        # 15 digits: a count past a million stays exact (`g` alone keeps six)
                        lines.append(f"{name}{{{text}}} {value:.15g}" if text else f"{name} {value:.15g}")
        return "\n".join(lines + (extra or [])) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


REGISTRY = Registry()
