"""deploy/: the Kustomize manifests render, and what they say matches the code: every flag they
pass is one the command accepts, the grace period covers the drain bound, the probes are the
ones the worker serves, and each autoscaler's query returns forklift's signal."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.main
import yaml
from apps.ops import insert_job
from helpers import wait_until

from forklift import Worker
from forklift._worker.drain import TEARDOWN_BOUND
from forklift.cli.main import app as cli
from forklift.ops import scale as sc
from forklift.ops.context import OpsContext

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("keda-postgresql", "keda-prometheus")
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: the"
                                   " manifests cannot be rendered here")


def render(target: str) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(DEPLOY / target)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for doc in docs:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec") if "template" in spec else None
        if pod:
            found.extend(pod.get("containers", []))
    return found


def accepted(args: list[str]) -> None:
    """Parse ``forklift ARGS`` as the CLI would, without running it (unknown flags fail)."""
    group = typer.main.get_command(cli)
    words = list(args)
    command: Any = group
    name = "forklift"
    while words and hasattr(command, "get_command") and not words[0].startswith("-"):
        name = words.pop(0)
        command = command.get_command(None, name)
        assert command is not None, f"forklift has no command {name!r}"
    command.make_context(name, words)


def flag(args: list[str], name: str) -> str | None:
    for i, word in enumerate(args):
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
        if word == name and i + 1 < len(args):
            return args[i + 1]
    return None


@needs_kubectl
@pytest.mark.parametrize("target", ["base", *(f"overlays/{o}" for o in OVERLAYS)])
def test_every_manifest_renders_and_passes_only_flags_the_cli_accepts(target: str) -> None:
    docs = render(target)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Job", "PodDisruptionBudget", "ServiceAccount"} <= kinds
    boxes = containers(docs)
    assert boxes
    for box in boxes:
        accepted(box["args"])


def test_the_dockerfile_runs_a_command_the_cli_accepts() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    for cmd in re.findall(r"^CMD (\[.*\])$", text, re.M):
        accepted(yaml.safe_load(cmd))
    exposed = re.findall(r"^EXPOSE (\d+)$", text, re.M)
    assert exposed == ["9100"]
    assert '"--metrics-port", "9100"' in text


@needs_kubectl
def test_the_grace_period_covers_the_drain_bound() -> None:
    (deployment,) = [d for d in render("base") if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    defaults = {p.name: p.default for p in typer.main.get_command(cli).get_command(None, "worker")
                .params}  # type: ignore[union-attr]
    drain = float(flag(worker["args"], "--drain-timeout") or defaults["drain_timeout"])


    sig = inspect.signature(Worker)
    bound = (drain + sig.parameters["drain_grace"].default + sig.parameters["final_timeout"].default
             + TEARDOWN_BOUND)
    pause = worker["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] >= bound + float(pause[1])
    # A rollout never takes capacity away before the new pod is ready.
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


@needs_kubectl
def test_the_probes_use_the_port_the_worker_serves_them_on() -> None:
    (deployment,) = [d for d in render("base") if d["kind"] == "Deployment"]
    (worker,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in worker["ports"]}
    assert ports["probes"] == int(flag(worker["args"], "--metrics-port") or 0)
    paths = {worker[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    assert paths == {"/healthz", "/readyz"}
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert worker[probe]["httpGet"]["port"] == "probes"


def _swap_port(args: list[str], name: str, port: int) -> list[str]:
    """``args`` with flag ``name``'s value replaced by ``port``."""
    swapped, skip = [], False
    for i, word in enumerate(args):
        if skip:
            skip = False
        elif word.startswith(f"{name}="):
            swapped.append(f"{name}={port}")
        elif word == name and i + 1 < len(args):
            swapped += [name, str(port)]
            skip = True
        else:
            swapped.append(word)
    return swapped


@needs_kubectl
def test_a_worker_run_with_the_manifests_args_serves_their_probes(dsn: str, tmp_path: Path) -> None:
    """The Deployment's probes, asked of a worker started with its container's args: each path
    answers 200 on the port the probes name (here moved to a free port: 9100 may be taken on
    the machine running the tests)."""
    (deployment,) = [d for d in render("base") if d["kind"] == "Deployment"]
    (worker,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in worker["ports"]}
    probes = [worker[p]["httpGet"] for p in ("livenessProbe", "readinessProbe", "startupProbe")]
    (named,) = {p["port"] for p in probes}
    flag_name = next(f for f in ("--health-port", "--metrics-port")
                     if flag(worker["args"], f) is not None)
    assert int(flag(worker["args"], flag_name) or 0) == ports[named]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    args = [*_swap_port(worker["args"], flag_name, port), "--app", "apps.probes:app",
            "--queues", "probes"]
    log = tmp_path / "worker.log"
    env = dict(os.environ, FORKLIFT_DSN=dsn, PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "forklift.cli.main", *args],
                                cwd=ROOT / "tests", env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        for path in {p["path"] for p in probes}:
            wait_until(lambda path=path: _status(port, path) == 200, timeout=30,  # type: ignore[misc]
                       message=lambda path=path: f"{path}: {_status(port, path)}\n"  # type: ignore[misc]
                       f"{log.read_text(errors='replace')[-3000:]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@needs_kubectl
def test_the_sql_scaler_query_returns_the_signal(conn: psycopg.Connection[Any]) -> None:
    (scaled,) = [d for d in render("overlays/keda-postgresql") if d["kind"] == "ScaledObject"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "postgresql" and trigger["metadata"]["targetQueryValue"] == "1"
    query = trigger["metadata"]["query"]
    m = re.fullmatch(r"SELECT forklift\.desired_workers\('(\w+)', (\d+), (\d+), ([\d.]+)\)", query)
    assert m, query
    queue, per_worker, most, target = m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))
    for _ in range(35):
        insert_job(conn, queue=queue, state="available")
    row = conn.execute(query).fetchone()
    assert row is not None
    expected = sc.desired_workers(conn, OpsContext(), queue, per_worker=per_worker,
                                  max_workers=most, target=target)
    assert row[0] == expected == 4
    # The Deployment's concurrency is what the query assumes a worker brings.
    (deployment,) = [d for d in render("base") if d["kind"] == "Deployment"]
    (worker,) = deployment["spec"]["template"]["spec"]["containers"]
    assert int(flag(worker["args"], "--concurrency") or 10) == per_worker
    # Scale-in at most one pod a grace period.
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    (policy,) = behavior["scaleDown"]["policies"]
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert (policy["type"], policy["value"]) == ("Pods", 1) and policy["periodSeconds"] >= grace
