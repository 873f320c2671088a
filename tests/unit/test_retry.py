"""Retry policy and classification, without a database: Backoff bounds for every kind and jitter
mode, and what each way a handler can end becomes (Retry, Snooze, Fail, anything else)."""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forklift import Backoff, Fail, Forklift, JobContext, Retry, Snooze
from forklift._worker.claim import Claimed
from forklift._worker.execute import classify, run_attempt

kinds = st.sampled_from(["exponential", "linear", "fixed"])
jitters = st.sampled_from(["full", "equal", "none"])
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
attempts = st.integers(min_value=-5, max_value=10**6)


@given(kinds, jitters, seconds, seconds, attempts, st.integers())
def test_every_delay_lies_within_its_jitter_band(
    kind: Any, jitter: Any, base: float, cap: float, attempt: int, seed: int
) -> None:
    b = Backoff(kind=kind, base=base, max=cap, jitter=jitter)
    ceiling = b.ceiling(attempt)
    assert 0 <= ceiling <= cap
    d = b.delay(attempt, random.Random(seed))
    if jitter == "none":
        assert d == ceiling
    elif jitter == "equal":
        assert ceiling / 2 <= d <= ceiling
    else:
        assert 0 <= d <= ceiling


@given(kinds, seconds, seconds, st.integers(min_value=1, max_value=10**6))
def test_the_ceiling_never_shrinks_from_one_attempt_to_the_next(
    kind: Any, base: float, cap: float, attempt: int
) -> None:
    b = Backoff(kind=kind, base=base, max=cap, jitter="none")
    assert b.ceiling(attempt) <= b.ceiling(attempt + 1)


def test_the_shapes_of_the_three_kinds() -> None:
    assert [Backoff("exponential", 1, 100, "none").ceiling(n) for n in range(1, 9)] == [
        1, 2, 4, 8, 16, 32, 64, 100]
    assert [Backoff("linear", 3, 10, "none").ceiling(n) for n in range(1, 5)] == [3, 6, 9, 10]
    assert [Backoff("fixed", 5, 10, "none").ceiling(n) for n in range(1, 4)] == [5, 5, 5]
    assert Backoff().jitter == "equal"


@given(kinds, jitters, seconds, seconds)
def test_a_policy_survives_its_json_round_trip(kind: Any, jitter: Any, base: float,
                                               cap: float) -> None:
    b = Backoff(kind=kind, base=base, max=cap, jitter=jitter)
    assert Backoff.from_json(b.to_json()) == b


@pytest.mark.parametrize("bad", [
    {"kind": "quadratic"}, {"jitter": "some"}, {"base": -1.0}, {"max": -0.5},
])
def test_a_nonsense_policy_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)


def test_retry_and_snooze_times_in_every_spelling() -> None:
    assert Retry(5).after == 5
    assert Retry(timedelta(minutes=2)).after == 120
    assert 59 < Retry(datetime.now(UTC) + timedelta(minutes=1)).after <= 60
    assert Retry(-3).after == 0 and Retry(datetime(2000, 1, 1, tzinfo=UTC)).after == 0
    assert Snooze(timedelta(seconds=7)).delay == 7 and Snooze(-1).delay == 0


# -- classification ---------------------------------------------------------------------------------
app = Forklift(dsn="postgresql://unused")
POLICY = Backoff(kind="fixed", base=60, max=300, jitter="none")


@app.job(name="t.sync", max_attempts=3, retry=POLICY, failure_codes=["card_declined"])
def sync_handler(ctx: JobContext, args: dict[str, Any]) -> str:
    return raise_or_return(args)


@app.job(name="t.async", max_attempts=3, retry=POLICY, failure_codes=["card_declined"])
async def async_handler(ctx: JobContext, args: dict[str, Any]) -> str:
    if args.get("cancelled_inside"):
        await asyncio.get_running_loop().create_future()  # cancelled below, by the test
    return raise_or_return(args)


@app.job(name="t.quiet", max_attempts=3, errors="codes", failure_codes=["card_declined"])
def quiet(ctx: JobContext, args: dict[str, Any]) -> str:
    return raise_or_return(args)


@app.job(name="t.typed", max_attempts=3)
def typed(ctx: JobContext, count: int) -> int:
    return count


def raise_or_return(args: dict[str, Any]) -> str:
    what = args.get("raise")
    if what == "retry":
        raise Retry(args["after"], reason="later")
    if what == "snooze":
        raise Snooze(args["after"])
    if what == "fail":
        raise Fail(args["code"], "no")
    if what == "error":
        raise ValueError("token=hunter2 broke it")
    if what == "exit":
        raise SystemExit(3)
    if what == "cancel":
        raise asyncio.CancelledError  # an inner task's cancellation, not the worker's
    return "done"


def claimed(kind: str, args: Any, *, attempt: int = 1, max_attempts: int = 3,
            retry: dict[str, Any] | None = None) -> Claimed:
    return Claimed(id=7, queue="default", kind=kind, args=args, attempt=attempt,
                   max_attempts=max_attempts, fence=42, retry=retry, meta={}, batch_id=None,
                   priority=0)


def ctx_for(job: Claimed) -> JobContext:
    return JobContext(job_id=job.id, kind=job.kind, queue=job.queue, attempt=job.attempt,
                      max_attempts=job.max_attempts, fence=job.fence, worker_id="w",
                      meta={}, on_progress=lambda p: None, on_publish=lambda v: None)


def run(kind: str, args: Any, **claim: Any) -> Any:
    job = claimed(kind, args, **claim)

    async def go() -> Any:
        with ThreadPoolExecutor(1) as pool:
            return await run_attempt(job, app.kinds.get(kind), ctx_for(job), pool, 10_000)

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["t.sync", "t.async"])
def test_retry_is_an_attempt_at_the_named_time_clamped_by_the_max(kind: str) -> None:
    o = run(kind, {"raise": "retry", "after": 30})
    assert (o.next, o.delay, o.refund, o.code) == ("retryable", 30, 0, "error")
    assert o.error["message"] == "later"
    assert run(kind, {"raise": "retry", "after": 10**6}).delay == 300  # the kind's max
    # A per-enqueue policy overrides the kind's, max included.
    override = Backoff(kind="fixed", base=1, max=45, jitter="none").to_json()
    assert run(kind, {"raise": "retry", "after": 10**6}, retry=override).delay == 45
    # Still an attempt: the last one goes dead.
    assert run(kind, {"raise": "retry", "after": 1}, attempt=3).next == "dead"


@pytest.mark.parametrize("kind", ["t.sync", "t.async"])
def test_snooze_is_not_an_attempt_and_records_no_error(kind: str) -> None:
    o = run(kind, {"raise": "snooze", "after": 90}, attempt=3)
    assert (o.next, o.delay, o.refund, o.error) == ("scheduled", 90, 1, None)


@pytest.mark.parametrize("kind", ["t.sync", "t.async"])
def test_fail_is_dead_at_once_with_attempts_unspent(kind: str) -> None:
    o = run(kind, {"raise": "fail", "code": "card_declined"}, attempt=1, max_attempts=20)
    assert (o.next, o.code, o.refund) == ("dead", "card_declined", 0)
    assert o.error["code"] == "card_declined" and o.error["attempt"] == 1
    undeclared = run(kind, {"raise": "fail", "code": "made_up"})
    assert (undeclared.next, undeclared.code) == ("dead", "internal_error")
    assert "made_up" in undeclared.error["message"]


@pytest.mark.parametrize("kind", ["t.sync", "t.async"])
def test_anything_else_is_retried_by_the_backoff_until_the_last_attempt(kind: str) -> None:
    o = run(kind, {"raise": "error"})
    assert (o.next, o.delay, o.code) == ("retryable", 60, "error")
    assert o.error["type"] == "ValueError" and "hunter2" not in o.error["message"]
    assert o.error["traceback"][-1]["func"] == "raise_or_return"
    assert run(kind, {"raise": "error"}, attempt=3).next == "dead"
    exited = run(kind, {"raise": "exit"})  # BaseException, not the worker's own shutdown
    assert (exited.next, exited.code) == ("retryable", "handler_exit")
    inner = run(kind, {"raise": "cancel"})  # a CancelledError the worker did not cause
    assert inner is not None and inner.next == "retryable"


def test_errors_codes_stores_no_handler_text() -> None:
    for args, code in (({"raise": "error"}, "error"),
                       ({"raise": "fail", "code": "card_declined"}, "card_declined"),
                       ({"raise": "fail", "code": "made_up"}, "internal_error")):
        entry = run("t.quiet", args).error
        assert entry["code"] == code
        assert set(entry) == {"code", "type", "attempt", "worker", "at"}, entry


def test_bad_input_is_a_terminal_failure_with_a_clear_code() -> None:
    assert run("t.nobody", {}).code == "unknown_kind"
    o = run("t.typed", "not a number")
    assert (o.next, o.code) == ("dead", "invalid_payload")
    assert run("t.typed", 5).result == "5"


def test_the_workers_own_cancellation_is_not_a_failure() -> None:
    job = claimed("t.async", {"cancelled_inside": True})

    async def go() -> None:
        with ThreadPoolExecutor(1) as pool:
            task = asyncio.ensure_future(
                run_attempt(job, app.kinds["t.async"], ctx_for(job), pool, 10_000))
            await asyncio.sleep(0)
            task.cancel()  # teardown: no reason given to the context
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())


@settings(max_examples=50)
@given(st.sampled_from(["retry", "snooze", "fail", "error"]), st.integers(1, 5))
def test_classify_never_refunds_a_failure_nor_charges_a_snooze(what: str, attempt: int) -> None:
    job = claimed("t.sync", {}, attempt=attempt, max_attempts=5)
    exc = {"retry": Retry(10), "snooze": Snooze(10), "fail": Fail("card_declined"),
           "error": RuntimeError("x")}[what]
    o = classify(job, ctx_for(job), app.kinds["t.sync"], exc)
    assert o.refund == (1 if what == "snooze" else 0)
    assert (o.error is None) == (what == "snooze")
