-- forklift schema, version 29: a job may carry the payload version its producer declared
-- (`@app.job(version=N)`), so that a worker upcasts an older payload before validating it and
-- leaves a newer one for a worker that reads it (forklift._jobs.payload_versions).
--
-- A nullable column only, written only by kinds that declare a version: every other job leaves
-- it empty (version 1) and pays nothing. Workers of every older version keep working: they never
-- read it (they would validate a newer payload as their own version, as before).

ALTER TABLE {s}.jobs ADD COLUMN payload_version integer;

-- A schedule's payload version (its kind's, as the app that recorded it declares), so a job an
-- operator runs from it by hand (`forklift schedules run-now`) carries it as a tick's does.
ALTER TABLE {s}.schedules ADD COLUMN payload_version integer;

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns
-- in step.
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS payload_version integer;
    END IF;
END $$;
