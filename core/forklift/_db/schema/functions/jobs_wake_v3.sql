-- The insert trigger's function, version 3 (installed by migration 0012; v2 was 0011's).
--
-- The same wake-up as version 2 (see jobs_wake_v2.sql for why a producer NOTIFYs only when a
-- worker left a mark, and why no job is stranded while a worker goes idle), with the statements
-- it runs per insert cut from four to two. Each statement a PL/pgSQL trigger runs costs as much
-- as a small query (an executor start and end, a snapshot): a single enqueue's trigger was most
-- of what forklift adds to a plain INSERT on the server.
--
--   * A queue this session has already recorded is not looked up again: the session keeps the
--     names it recorded (or found recorded) in the setting forklift.queues_seen, set with
--     is_local false, which is transactional like the row: if the transaction (or savepoint)
--     that recorded a queue rolls back, so does its name in the setting, and the next insert
--     records the queue again. forklift never deletes a queues row; one deleted by hand is
--     recorded again by the next session (or on a new connection), and nothing reads it for
--     correctness (a pause or limit creates it as needed).
--   * The shared advisory lock is taken by a plain expression, not a PERFORM (a query).
--
-- What is left per insert: one pass over the statement's new rows (grouped by queue), and,
-- when they make jobs available, the lock and the look for marks (two statements, so the look
-- takes its snapshot after the lock is held, which is what closes the race with a worker going
-- idle).
CREATE OR REPLACE FUNCTION {s}.jobs_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    ready boolean;
    seen text := current_setting('forklift.queues_seen', true);
    known text;
BEGIN
    FOR q, ready IN
        SELECT n.queue, bool_or(n.state = 'available') FROM new_jobs n GROUP BY n.queue
    LOOP
        -- schema and queue, each name framed by separators no queue name holds (forklift
        -- refuses control characters in names)
        known := chr(30) || TG_TABLE_SCHEMA || chr(31) || q || chr(30);
        IF seen IS NULL OR strpos(seen, known) = 0 THEN
            IF NOT EXISTS (SELECT FROM {s}.queues WHERE name = q) THEN
                INSERT INTO {s}.queues (name) VALUES (q) ON CONFLICT (name) DO NOTHING;
            END IF;
            -- bounded: a session writing to thousands of queues starts the list over
            seen := set_config('forklift.queues_seen',
                               CASE WHEN length(seen) < 8000 THEN seen ELSE '' END || known,
                               false);
        END IF;
        CONTINUE WHEN NOT ready;
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pg_notify({channel}, q);
            CONTINUE;
        END IF;
        -- (void cast to text is never NULL: the IF only evaluates the call)
        IF pg_advisory_xact_lock_shared(hashtext({channel}), hashtext(q))::text IS NULL THEN
            NULL;
        END IF;
        IF EXISTS (SELECT FROM {s}.idle_workers WHERE queue = q) THEN
            DELETE FROM {s}.idle_workers WHERE ctid = ANY (ARRAY(
                SELECT ctid FROM {s}.idle_workers WHERE queue = q FOR UPDATE SKIP LOCKED));
            PERFORM pg_notify({channel}, q);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
