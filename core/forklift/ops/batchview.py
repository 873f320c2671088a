"""How a batch looks in the terminal, for the CLI and the console alike: its state as glyph and
word, a progress bar of completed / failed / remaining targets, rate and mode."""

from __future__ import annotations

from rich.text import Text

from forklift import Batch

__all__ = ["STATES", "mode_label", "progress_bar", "rate_label", "run_rate", "state_text"]

#: glyph and style per batch state: the glyph and the word carry the meaning, colour decorates.
STATES: dict[str, tuple[str, str]] = {
    "running": ("▶", "green"),
    "done": ("✔", "green"),
    "failed": ("✖", "bold red"),
    "partial": ("◑", "yellow"),
    "cancelled": ("⊘", "magenta"),
}


def state_text(state: str) -> Text:
    glyph, style = STATES.get(state, ("?", ""))
    return Text(f"{glyph} {state}", style=style)


def progress_bar(batch: Batch, width: int = 20) -> Text:
    """Completed (█), failed or cancelled (▓) and remaining (░) targets, then the counts."""
    total = max(batch.total, 1)
    ok = round(width * batch.completed / total)
    bad = min(round(width * (batch.failed + batch.cancelled) / total), width - ok)
    bar = Text()
    bar.append("█" * ok, style="green")
    bar.append("▓" * bad, style="red")
    bar.append("░" * (width - ok - bad), style="dim")
    bar.append(f" {batch.completed:,}✔ {batch.failed:,}✖")
    if batch.cancelled:
        bar.append(f" {batch.cancelled:,}⊘")
    bar.append(f" /{batch.total:,}")
    return bar


def run_rate(b: Batch) -> float | None:
    """Targets run per second: for a finished batch over its whole run, counting the targets
    that ran (completed or failed), not the ones a cancel ended unrun."""
    if not b.is_terminal:
        return b.rate
    ran = b.completed + b.failed
    span = ((b.finished_at or b.observed_at) - b.created_at).total_seconds()
    return ran / span if ran and span > 0 else None


def rate_label(rate: float | None) -> str:
    if rate is None:
        return "–"
    return f"{rate:.1f}/s" if rate >= 1 else f"{rate * 60:.1f}/min"


def mode_label(b: Batch) -> str:
    if b.mode == "serial":
        return "serial"
    return f"parallel ×{b.max_parallel}" if b.max_parallel else "parallel"
