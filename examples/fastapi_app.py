"""A FastAPI app that enqueues forklift jobs inside its own database transaction.

    FORKLIFT_DSN=postgresql://... uvicorn --app-dir examples fastapi_app:api
    FORKLIFT_DSN=postgresql://... forklift worker --app examples.fastapi_app:app

The lifespan opens forklift's pool and the app's own; ``POST /orders`` inserts an order and
enqueues its receipt on the same connection, in one transaction: the job exists exactly when
the order does (a request that fails after the enqueue leaves neither). ``/metrics`` serves
forklift's Prometheus registry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from forklift import Forklift, JobContext, metrics

app = Forklift()  # the database: FORKLIFT_DSN, DATABASE_URL, or the embedded server


class Receipt(BaseModel):
    order_id: int


@app.job(name="shop.send_receipt", queue="mail", max_attempts=5)
async def send_receipt(ctx: JobContext, receipt: Receipt) -> str:
    return f"receipt for order {receipt.order_id} sent"


class Order(BaseModel):
    item: str
    quantity: int = 1


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    metrics.enable()  # a worker started in this process would record metrics too
    await app.async_pool()  # forklift's pool: fail at start if the database is not there
    async with AsyncConnectionPool(app.dsn, open=False) as pool:
        async with pool.connection() as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS orders"
                               " (id bigserial PRIMARY KEY, item text NOT NULL, quantity int)")
        api.state.pool = pool
        yield
    await app.aclose()


api = FastAPI(lifespan=lifespan)
api.mount("/metrics", metrics.asgi_app())


@api.post("/orders")
async def create_order(order: Order) -> dict[str, Any]:
    pool: AsyncConnectionPool[Any] = api.state.pool
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("INSERT INTO orders (item, quantity) VALUES (%s, %s)"
                                 " RETURNING id", (order.item, order.quantity))
        row = await cur.fetchone()
        assert row is not None
        job = await send_receipt.enqueue_async(Receipt(order_id=row[0]), conn=conn)
        if order.quantity > 100:  # refused after the enqueue: the transaction takes both back
            raise HTTPException(status_code=422, detail="at most 100 of an item")
    return {"order": row[0], "job": job.id}
