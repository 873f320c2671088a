-- forklift schema, version 8: dead letters grouped on the server.

-- One row per dead job: its group (kind, last error code, message shape) and when it died,
-- kept by triggers on jobs, so grouping every dead job is a scan of this narrow table and
-- acting on a group finds its jobs by index, however many dead jobs there are. Only moves into
-- or out of `dead` touch it (the triggers' WHEN clauses keep every other write out).
\ir ../functions/dead_letters_v1.sql

CREATE TABLE {s}.dead_letters (
    job_id      bigint      PRIMARY KEY,
    group_key   text        NOT NULL,
    kind        text        NOT NULL,
    code        text        NOT NULL,
    fingerprint text        NOT NULL,
    queue       text        NOT NULL,
    finished_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05);
CREATE INDEX dead_letters_group_idx ON {s}.dead_letters (group_key, finished_at, job_id);

INSERT INTO {s}.dead_letters (job_id, group_key, kind, code, fingerprint, queue, finished_at)
SELECT id, {s}.dead_group_key(kind, code, shape), kind, code, shape, queue, finished_at
FROM (
    SELECT id, kind, queue, finished_at, coalesce(errors -> -1 ->> 'code', 'unknown') AS code,
           {s}.error_fingerprint(errors -> -1 ->> 'message') AS shape
    FROM {s}.jobs WHERE state = 'dead'
) d;

CREATE TRIGGER jobs_dead_moved AFTER UPDATE OF state ON {s}.jobs
    FOR EACH ROW
    WHEN ((OLD.state = 'dead') <> (NEW.state = 'dead'))
    EXECUTE FUNCTION {s}.jobs_dead_moved();
CREATE TRIGGER jobs_dead_inserted AFTER INSERT ON {s}.jobs
    FOR EACH ROW
    WHEN (NEW.state = 'dead')
    EXECUTE FUNCTION {s}.jobs_dead_moved();
CREATE TRIGGER jobs_dead_deleted AFTER DELETE ON {s}.jobs
    FOR EACH ROW
    WHEN (OLD.state = 'dead')
    EXECUTE FUNCTION {s}.jobs_dead_moved();
CREATE TRIGGER jobs_dead_truncated AFTER TRUNCATE ON {s}.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.jobs_dead_truncated();

-- Partitioned history (forklift migrate --partitioned-history) enabled before this version:
-- its dead jobs join their groups, and the same triggers keep them (forklift._features.history).
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        INSERT INTO {s}.dead_letters (job_id, group_key, kind, code, fingerprint, queue,
                                      finished_at)
        SELECT id, {s}.dead_group_key(kind, code, shape), kind, code, shape, queue, finished_at
        FROM (
            SELECT id, kind, queue, finished_at,
                   coalesce(errors -> -1 ->> 'code', 'unknown') AS code,
                   {s}.error_fingerprint(errors -> -1 ->> 'message') AS shape
            FROM {s}.jobs_history WHERE state = 'dead'
        ) d
        ON CONFLICT (job_id) DO NOTHING;
        CREATE TRIGGER jobs_history_dead_in AFTER INSERT ON {s}.jobs_history
            FOR EACH ROW WHEN (NEW.state = 'dead') EXECUTE FUNCTION {s}.jobs_dead_moved();
        CREATE TRIGGER jobs_history_dead_out AFTER DELETE ON {s}.jobs_history
            FOR EACH ROW WHEN (OLD.state = 'dead') EXECUTE FUNCTION {s}.jobs_dead_moved();
    END IF;
END
$$;
