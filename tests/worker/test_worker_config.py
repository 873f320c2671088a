"""``Worker(app, ...)``'s arguments become one frozen, checked WorkerConfig: bad values fail at
construction with the errors they always did, and nothing changes the configuration later."""

from __future__ import annotations

import dataclasses

import pytest

from forklift import Forklift, JobContext, Worker
from forklift._worker.config import WorkerConfig


def _app() -> Forklift:
    app = Forklift("postgresql://nobody@127.0.0.1:1/never")

    @app.job(name="cfg.mail", queue="mail")
    def mail(ctx: JobContext, args: dict[str, object]) -> None: ...

    @app.job(name="cfg.bill", queue="billing")
    def bill(ctx: JobContext, args: dict[str, object]) -> None: ...

    return app


@pytest.mark.parametrize(("options", "message"), [
    ({"concurrency": 0}, "concurrency must be at least 1"),
    ({"lease": 0.5}, "lease must be at least 1 second"),
])
def test_a_bad_setting_fails_at_construction(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Worker(_app(), **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        WorkerConfig.of("forklift", ["default"], **options)


def test_the_configuration_is_built_once_and_frozen() -> None:
    worker = Worker(_app(), concurrency=3, prefetch_max=-5, worker_id="w1")
    config = worker.config
    assert config.queues == ("billing", "mail")  # the app's kinds' queues, sorted
    assert worker.queues == ["billing", "mail"]
    assert (config.concurrency, config.prefetch_max, worker.id) == (3, 0, "w1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.concurrency = 5  # type: ignore[misc]
    named = Worker(_app(), queues=["mail", "mail", "other"])
    assert named.config.queues == ("mail", "other")
    assert Worker(Forklift("postgresql://nobody@127.0.0.1:1/never")).queues == ["default"]
