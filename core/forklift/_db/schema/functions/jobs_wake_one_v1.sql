-- The single enqueue's own wake-up, version 1 (installed by migration 0033).
--
-- The default one-job enqueue (forklift._jobs.insert) names its queue through this function in
-- its INSERT, so the function runs once, before the row is stored, and does for that one row
-- what the statement trigger (jobs_after_insert, functions/jobs_wake_v5.sql) would do after
-- it: register the queue and wake its idle workers (jobs_wake_queue). It then marks the
-- statement as woken (the setting forklift.woken, local to the transaction, holding this
-- statement's start time), and the trigger's WHEN clause skips that one statement: no
-- transition table, no trigger call. Any other statement, later in the same transaction
-- included, starts at a later time and runs the trigger as before. (Statements sent together
-- in one simple-query string share their start time; forklift sends this one alone, with
-- parameters, so no statement of its own shares it.)
--
-- The pauses' lock is taken shared before their flag is read, as the trigger does. While some
-- kind may be paused (the flag), or in a transaction that is not READ COMMITTED, the function
-- marks nothing and the trigger does everything, holding the row of a paused kind.
CREATE OR REPLACE FUNCTION {s}.jobs_wake_one(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    -- (void cast to text is never NULL: the IF only evaluates the call)
    IF pg_advisory_xact_lock_shared(hashtext('forklift.pauses'), 0)::text IS NULL THEN
        NULL;
    END IF;
    IF pg_sequence_last_value('{s}.kind_pauses_flag'::regclass) IS NOT NULL
       OR current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN q;
    END IF;
    IF set_config('forklift.woken', statement_timestamp()::text, true) IS NULL THEN
        NULL;
    END IF;
    RETURN {s}.jobs_wake_queue(q, true);
END;
$$;
