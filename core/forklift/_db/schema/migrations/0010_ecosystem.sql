-- forklift schema, version 10: the trace context of the enqueue that made a job.

-- The W3C traceparent of the enqueue's producer span (forklift.otel), read by the claim so the
-- attempt's consumer span joins the trace. NULL for every untraced enqueue (no tracer provider
-- configured): a bulk COPY sends the column only when some row has it. Never indexed.
ALTER TABLE {s}.jobs ADD COLUMN traceparent text;

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns in step.
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN traceparent text;
    END IF;
END $$;
