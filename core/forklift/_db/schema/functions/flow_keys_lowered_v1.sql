-- The flow_keys trigger's function, version 1 (installed by migration 0017). A later version is
-- a new file that a later migration includes; schema.sql includes the current one.

-- A value can hold more running jobs than its key's limit only after that limit fell: every
-- claim admits within the limit it reads, and a hand-off (forklift._features.flow.handoff) keeps each
-- value's count what it was. So a hand-off counts the holders of a key's values only while
-- lowered_at is set: when its limit is lowered, a limit is set where there was none, or its row
-- is made while running jobs carry it (a row deleted and recorded again). The leader clears it
-- once every value is within the limit (forklift._worker.maintenance.flow_recount).
CREATE OR REPLACE FUNCTION {s}.flow_keys_lowered() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.concurrency IS NULL THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.concurrency IS NULL OR NEW.concurrency < OLD.concurrency THEN
            NEW.lowered_at := now();
        END IF;
    ELSIF EXISTS (SELECT 1 FROM {s}.flow_keys k WHERE k.name = NEW.name) THEN
        -- a worker's periodic record of a key it finds recorded: ON CONFLICT makes it an
        -- UPDATE, which this trigger sees again; no look at the running jobs every 30 s
        RETURN NEW;
    ELSIF EXISTS (SELECT 1 FROM {s}.jobs r CROSS JOIN LATERAL unnest(r.keys) AS e
                  WHERE r.state = 'running' AND r.keys IS NOT NULL
                    AND split_part(e, chr(31), 1) = NEW.name) THEN
        NEW.lowered_at := now();
    END IF;
    RETURN NEW;
END;
$$;
