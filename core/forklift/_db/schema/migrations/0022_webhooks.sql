-- forklift schema, version 22: outbound webhook endpoints' health and attempts, and the
-- inbound receiver's receipts (forklift.webhooks). Only new tables: workers of every older
-- version keep working.

-- Outbound webhooks (forklift.webhooks): each endpoint's health, as its deliveries leave it and
-- as operators change it. A row appears with an endpoint's first delivery (or an operator's
-- disable); the endpoint's URL and secrets live in the code that declares it, never here.
CREATE TABLE {s}.webhook_endpoints (
    name            text PRIMARY KEY,
    url             text,
    enabled         boolean     NOT NULL DEFAULT true,
    disabled_reason text,
    disabled_at     timestamptz,
    disabled_by     text,
    last_status     integer,
    last_size       integer,
    last_error      text,
    last_at         timestamptz,
    last_ok_at      timestamptz,
    failure_streak  integer     NOT NULL DEFAULT 0,
    delivered       bigint      NOT NULL DEFAULT 0,
    failed          bigint      NOT NULL DEFAULT 0
);

-- One row per delivery attempt: the status and the size of the answer, never its body.
CREATE TABLE {s}.webhook_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint    text        NOT NULL,
    event_id    text        NOT NULL,
    event_type  text        NOT NULL,
    job_id      bigint      NOT NULL,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    status      integer,
    size        integer,
    outcome     text        NOT NULL,
    error       text,
    duration_ms integer
);
CREATE INDEX webhook_attempts_endpoint_idx ON {s}.webhook_attempts (endpoint, id);

-- The inbound receiver's deliveries by the sender's id: a redelivery finds its row and is
-- acknowledged without a second job.
CREATE TABLE {s}.webhook_receipts (
    receiver    text        NOT NULL,
    delivery_id text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    job_id      bigint,
    PRIMARY KEY (receiver, delivery_id)
);
CREATE INDEX webhook_receipts_at_idx ON {s}.webhook_receipts (received_at);
