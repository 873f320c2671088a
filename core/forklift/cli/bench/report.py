"""What a bench run reports: figures with their targets, the run's sizes, and the text table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: The figures of the main performance table, in its order; a scenario's other figures
#: follow them (first these three, then any a later scenario module registers).
TABLE_KEYS: tuple[str, ...] = (
    "e2e", "e2e_preloaded", "client_cpu", "c1", "enqueue", "enqueue_16", "bulk_1000", "bulk_10000",
    "latency_p50", "latency_p99", "e2e_4w", "stats_1m", "claim_backlog",
)
EXTRA_KEYS: tuple[str, ...] = ("e2e_2w", "e2e_8w", "db_cpu", "memory")


@dataclass(frozen=True)
class Sizes:
    e2e_jobs: int = 100_000
    c1_jobs: int = 5_000
    enqueue_jobs: int = 4_000
    producers: int = 16
    producer_jobs: int = 16_000  # all producers together, per side
    bulk_jobs: int = 200_000  # enqueue_many in calls of bulk_call
    bulk_call: int = 10_000
    bulk_small_jobs: int = 100_000  # enqueue_many in calls of copy_batch
    copy_batch: int = 1_000
    latency_jobs: int = 500
    latency_every: float = 0.020
    memory_jobs: int = 1_000_000
    stats_finished: int = 1_000_000
    stats_live: int = 20_000
    stats_calls: int = 20
    backlog_small: int = 5_000
    backlog_large: int = 500_000
    # The opt-in steady scenarios (sustained, horizon): rates in jobs/s and stretches in s.
    sustained_rate: int = 800
    sustained_high_rate: int = 5_000
    sustained_seconds: float = 60.0
    horizon_seconds: float = 300.0


FULL = Sizes()
QUICK = Sizes(
    e2e_jobs=20_000, c1_jobs=1_000, enqueue_jobs=1_000, producer_jobs=4_000, bulk_jobs=40_000,
    bulk_small_jobs=20_000, latency_jobs=100, memory_jobs=100_000, stats_finished=100_000,
    stats_live=5_000, stats_calls=10, backlog_small=2_000, backlog_large=50_000,
    sustained_seconds=15.0, horizon_seconds=30.0,
)


def tiny_sizes() -> Sizes:
    """Sizes small enough for a smoke test: the shape of the report, not its figures."""
    return Sizes(
        e2e_jobs=300, c1_jobs=40, enqueue_jobs=40, producers=4, producer_jobs=80, bulk_jobs=400,
        bulk_call=200, bulk_small_jobs=200, copy_batch=100, latency_jobs=5, memory_jobs=1_000,
        stats_finished=2_000, stats_live=200, stats_calls=2, backlog_small=200,
        backlog_large=2_000, sustained_rate=200, sustained_high_rate=400, sustained_seconds=2.0,
        horizon_seconds=2.0,
    )


Rule = Literal["ratio>=", "ratio<=", "value<=", "within", "reported"]


@dataclass(frozen=True)
class Target:
    """How a figure is judged: its ratio to the reference, or its own value, against ``bound``."""

    rule: Rule
    bound: float = 0.0

    def text(self) -> str:
        return {
            "ratio>=": f">= {self.bound:.2f}x",
            "ratio<=": f"<= {self.bound:.2f}x",
            "value<=": f"<= {self.bound:g}",
            "within": f"within {self.bound:.0%}",
            "reported": "reported",
        }[self.rule]

    def judge(self, value: float | None, ratio: float | None) -> bool | None:
        if self.rule == "reported":
            return None
        if self.rule == "value<=":
            return value is not None and value <= self.bound
        if ratio is None:
            return False
        if self.rule == "ratio>=":
            return ratio >= self.bound
        if self.rule == "ratio<=":
            return ratio <= self.bound
        return abs(ratio - 1.0) <= self.bound


REPORTED = Target("reported")


@dataclass
class Figure:
    key: str
    title: str
    unit: str
    forklift: float | None
    reference: float | None
    reference_label: str
    target: str = ""
    ratio: float | None = None
    ok: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    rule: Target = field(default=REPORTED, repr=False)

    def judged(self) -> Figure:
        """The figure with its ratio, target text and verdict filled in from its rule."""
        if self.ratio is None:
            self.ratio = ratio(self.forklift, self.reference)
        self.target = self.target or self.rule.text()
        self.ok = self.rule.judge(self.forklift, self.ratio)
        return self

    @property
    def verdict(self) -> str:
        return "" if self.ok is None else ("PASS" if self.ok else "SHORT")


@dataclass
class ServerInfo:
    version: str
    fsync: str
    synchronous_commit: str
    origin: str
    local: bool


@dataclass
class BenchReport:
    started_at: float
    seconds: float
    quick: bool
    sizes: Sizes
    machine: dict[str, Any]
    server: ServerInfo
    figures: list[Figure]
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for f in doc["figures"]:
            f.pop("rule", None)
        for f, fig in zip(doc["figures"], self.figures, strict=True):
            f["verdict"] = fig.verdict
        return doc

    def figure(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def ordered(figures: list[Figure], registered: tuple[str, ...]) -> list[Figure]:
    """The main table first, in its order, then the extra figures, then any others."""
    order: dict[str, int] = {}
    for key in (*TABLE_KEYS, *EXTRA_KEYS, *registered):
        order.setdefault(key, len(order))
    return sorted(figures, key=lambda f: order.get(f.key, len(order)))


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "jobs/s":
        return f"{value:,.0f}"
    if unit in ("ms", "µs/job", "ms CPU"):
        return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"
    if unit in ("jobs", "tuples"):
        return f"{value:,.0f}"
    if unit == "MiB":
        return f"{value:,.1f}"
    return f"{value:,.3g}"


def table_rows(report: BenchReport) -> list[tuple[str, str, str, str, str, str]]:
    """(figure, forklift, reference, ratio, target, verdict) for printing."""
    rows = []
    for f in report.figures:
        ref = _fmt(f.reference, f.unit)
        if f.reference is not None and f.reference_label:
            ref = f"{ref} {f.reference_label}"
        rows.append((
            f"{f.title} [{f.unit}]",
            _fmt(f.forklift, f.unit),
            ref,
            "—" if f.ratio is None else f"{f.ratio:.2f}",
            f.target,
            f.verdict,
        ))
    return rows


def header_lines(report: BenchReport) -> list[str]:
    m, srv = report.machine, report.server
    return [
        f"machine: {m['cpus']} CPU ({m['cpu_model']}), {m['memory_gib']} GiB, {m['platform']},"
        f" Python {m['python']}, psycopg {m['psycopg']}",
        f"server: PostgreSQL {srv.version} ({srv.origin}), fsync={srv.fsync},"
        f" synchronous_commit={srv.synchronous_commit}",
        f"run: {'quick' if report.quick else 'full'} sizes, {report.seconds:.0f} s,"
        f" load average {m.get('load', '?')}",
    ]


def format_report(report: BenchReport) -> str:
    """The report as plain text: a header and an aligned table (for scripts and docs)."""
    head = ("figure", "forklift", "reference (same run)", "ratio", "target", "")
    rows = [head, *table_rows(report)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [*header_lines(report), ""]
    for k, r in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) if i in (0, 4) else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, problem in report.errors.items():
        lines.append(f"scenario {name} failed: {problem}")
    return "\n".join(lines)
