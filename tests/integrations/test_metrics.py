"""Prometheus metrics: /metrics of a real worker subprocess, parsed with prometheus_client."""

from __future__ import annotations

import socket
import urllib.request
from typing import Any

import psycopg
import pytest
from apps import eco
from eco_procs import Procs, procs
from helpers import wait_until
from prometheus_client.parser import text_string_to_metric_families

from forklift import metrics

__all__ = ["procs"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
           **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == x
                                                            for k, x in labels.items()))


def test_a_worker_serves_metrics_of_its_jobs_claims_flushes_and_queue_depth(
    dsn: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    eco.app.use(dsn)
    eco.ok.enqueue_many([{"secret": eco.SECRET}] * 5)
    eco.boom.enqueue({"secret": eco.SECRET})
    eco.fatal.enqueue({})
    eco.ok.enqueue_many([{}] * 3, queue="elsewhere")  # not served: stays available
    eco.app.close()
    port = _free_port()
    w = procs.start("--app", "apps.eco:app", "--metrics-port", str(port),
                    env={"FORKLIFT_DSN": dsn})

    def settled() -> Any:
        assert w.alive(), w.log()
        try:
            got = _scrape(port)
        except OSError:
            return None
        # An outcome is counted settled when its attempt ends, flushed when the settle
        # statement has written it (a round trip later: long on a loaded machine): wait for both.
        done = _value(got, "forklift_jobs_settled_total")
        flushed = _value(got, "forklift_flush_size_sum")
        depth = _value(got, "forklift_queue_depth", queue="elsewhere", state="available")
        return got if done == flushed == 8 and depth == 3 else None  # boom runs twice

    got = wait_until(settled, timeout=60, interval=0.1, message=lambda: w.log()[-3000:])
    assert _value(got, "forklift_jobs_settled_total", queue="eco", kind="eco.ok",
                  outcome="completed") == 5
    assert _value(got, "forklift_jobs_settled_total", kind="eco.boom", outcome="retryable") == 1
    assert _value(got, "forklift_jobs_settled_total", kind="eco.boom", outcome="dead") == 1
    assert _value(got, "forklift_jobs_settled_total", kind="eco.fatal", outcome="dead") == 1
    assert _value(got, "forklift_job_run_seconds_count", queue="eco") == 8
    assert _value(got, "forklift_job_pickup_lag_seconds_count", queue="eco") == 8
    assert _value(got, "forklift_claim_batch_size_sum") == 8
    assert _value(got, "forklift_flush_size_sum") == 8
    assert _value(got, "forklift_claimed_jobs_total") == 8
    for name in ("forklift_stale_writes_total", "forklift_lease_renewals_lost_total",
                 "forklift_rescued_jobs_total"):
        assert name in got and _value(got, name) == 0
    labels = {k for samples in got.values() for lab, _ in samples for k in lab}
    # (priority: the oldest-wait gauge, one series per priority that has waiting jobs)
    # (reason: why an enqueue to a full queue was not stored; refused, timeout, shed)
    assert labels <= {"queue", "kind", "outcome", "state", "worker", "le", "problem", "priority",
                      "reason"}
    everything = repr(got)
    assert eco.SECRET not in everything and eco.RESULT not in everything
    assert w.stop() == 0


def test_a_taken_metrics_port_fails_at_start_naming_it(dsn: str, procs: Procs) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        w = procs.start("--app", "apps.eco:app", "--metrics-port", str(port),
                        env={"FORKLIFT_DSN": dsn})
        assert w.popen.wait(60) == 1
    assert f"--metrics-port {port}" in w.log()


def test_label_values_are_capped() -> None:
    bounded = metrics._Bounded(limit=3)
    assert [bounded(f"k{i}") for i in range(5)] == ["k0", "k1", "k2", "other", "other"]
    assert bounded("k1") == "k1"


@pytest.mark.parametrize("name", ["forklift_jobs_settled", "forklift_queue_depth"])
def test_the_registry_is_forklifts_own(name: str) -> None:
    from prometheus_client import REGISTRY, generate_latest

    assert name in generate_latest(metrics.registry).decode()
    assert name not in generate_latest(REGISTRY).decode()
