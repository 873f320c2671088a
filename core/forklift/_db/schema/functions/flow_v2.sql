-- The keyed-insert trigger's function, version 2 (installed by migration 0032; v1 was 0007's).
--
-- Runs only for rows that carry keys or a weight (the trigger's WHEN), so plain enqueues never
-- call it. In the enqueue's own transaction: the job becomes visible together with its queue's
-- flags (no claim that ignores keys or weights can take it) and with a row for each of its key
-- values (the rows the flow claim locks; it re-creates one pruned meanwhile). A weighted job
-- flags its queue `weighted` too: the flow claim then counts its weight against the worker's
-- slots and the queue's limit, and claims that queue's jobs only for slots free now. The flags
-- are read first so the common case takes no lock on the queue's row.
CREATE OR REPLACE FUNCTION {s}.jobs_keyed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.keys IS NOT NULL THEN
        INSERT INTO {s}.flow_values (key) SELECT DISTINCT k FROM unnest(NEW.keys) AS k
            ORDER BY k ON CONFLICT (key) DO NOTHING;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = NEW.queue AND flow
                   AND (weighted OR NEW.weight IS NULL)) THEN
        INSERT INTO {s}.queues AS q (name, flow, weighted)
            VALUES (NEW.queue, true, NEW.weight IS NOT NULL)
            ON CONFLICT (name) DO UPDATE SET flow = true,
                weighted = q.weighted OR excluded.weighted, updated_at = now()
            WHERE NOT q.flow OR (excluded.weighted AND NOT q.weighted);
    END IF;
    RETURN NULL;
END;
$$;
