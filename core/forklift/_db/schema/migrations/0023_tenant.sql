-- forklift schema, version 23: a job may carry the tenant it belongs to and who enqueued it
-- (attribution, never authority), both written at enqueue and read by the operator tools.
--
-- This one only adds nullable columns: workers of every older version keep working (they never
-- read them, and a job they do not name a tenant for leaves both empty).

ALTER TABLE {s}.jobs ADD COLUMN tenant text;
ALTER TABLE {s}.jobs ADD COLUMN enqueued_by text;
