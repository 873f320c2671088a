-- The insert trigger's function, version 1 (installed by migration 0001).
-- A later version is a new file (jobs_wake_v2.sql) that a later migration includes; schema.sql
-- includes the current one. CREATE OR REPLACE, so including a new version replaces the old.

-- Wake listeners once per committing transaction and queue: NOTIFY folds identical
-- (channel, payload) pairs inside one transaction, and a statement trigger with a transition
-- table covers single inserts, multi-row inserts and COPY alike. The same statement records
-- the queue names so operators can list queues without scanning jobs.
CREATE OR REPLACE FUNCTION {s}.jobs_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT DISTINCT n.queue FROM new_jobs n LOOP
        INSERT INTO {s}.queues (name) VALUES (q) ON CONFLICT (name) DO NOTHING;
    END LOOP;
    FOR q IN SELECT DISTINCT n.queue FROM new_jobs n WHERE n.state = 'available' LOOP
        PERFORM pg_notify({channel}, q);
    END LOOP;
    RETURN NULL;
END;
$$;

