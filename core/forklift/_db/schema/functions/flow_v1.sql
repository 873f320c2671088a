-- The keyed-insert trigger's function, version 1 (installed by migration 0007).
-- A later version is a new file (flow_v2.sql) that a later migration includes; schema.sql
-- includes the current one. CREATE OR REPLACE, so including a new version replaces the old.

-- Runs only for rows that carry keys (the trigger's WHEN), so unkeyed enqueues never call it.
-- In the enqueue's own transaction: the job becomes visible together with its queue's flow
-- flag (no claim that ignores keys can take it) and with a row for each of its key values (the
-- rows the flow claim locks; it re-creates one pruned meanwhile). The flag is read first so the
-- common case takes no lock on the queue's row.
CREATE OR REPLACE FUNCTION {s}.jobs_keyed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.flow_values (key) SELECT DISTINCT k FROM unnest(NEW.keys) AS k
        ORDER BY k ON CONFLICT (key) DO NOTHING;
    IF NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = NEW.queue AND flow) THEN
        INSERT INTO {s}.queues AS q (name, flow) VALUES (NEW.queue, true)
            ON CONFLICT (name) DO UPDATE SET flow = true, updated_at = now() WHERE NOT q.flow;
    END IF;
    RETURN NULL;
END;
$$;
