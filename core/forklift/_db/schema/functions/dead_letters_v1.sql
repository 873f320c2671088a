-- Dead letters grouped on the server, version 1 (installed by migration 0008).
-- A later version is a new file (dead_letters_v2.sql) that a later migration includes; schema.sql
-- includes the current one. CREATE OR REPLACE, so including a new version replaces the old.

-- The shape of an error message, so that `user 41 not found` and `user 97 not found` fall in one
-- group: terminal escapes, control and bidi characters out; uuids, hex, quoted values and
-- numbers replaced; whitespace folded; at most 200 characters. Immutable: the same message
-- always has the same shape.
CREATE OR REPLACE FUNCTION {s}.error_fingerprint(message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT left(btrim(
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
    regexp_replace(regexp_replace(left(coalesce(message, ''), 2000),
        '\x1b\[[0-?]*[ -/]*[@-~]|\x1b[^\[]', '', 'g'),
        '[\x01-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]', '', 'g'),
        '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'gi'),
        '\y0x[0-9a-f]+\y|\y[0-9a-f]{12,}\y', '<hex>', 'gi'),
        '''[^''\n]{0,200}''|"[^"\n]{0,200}"', '<str>', 'g'),
        '(?<![A-Za-z_0-9])[0-9]+(\.[0-9]+)?', '<n>', 'g'),
        '\s+', ' ', 'g')), 200)
$$;

-- A group's id: short, stable, the same on every server for the same (kind, code, shape).
CREATE OR REPLACE FUNCTION {s}.dead_group_key(kind text, code text, fingerprint text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT left(md5(kind || chr(31) || code || chr(31) || fingerprint), 16)
$$;

-- Keeps {s}.dead_letters equal to the dead jobs: a job entering `dead` is added with its last
-- error's code and shape, one leaving it (requeue, delete, retention) is removed.
CREATE OR REPLACE FUNCTION {s}.jobs_dead_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_code text;
    v_shape text;
BEGIN
    IF TG_OP = 'DELETE' OR NEW.state <> 'dead' THEN
        DELETE FROM {s}.dead_letters WHERE job_id = OLD.id;
        RETURN NULL;
    END IF;
    v_code := coalesce(NEW.errors -> -1 ->> 'code', 'unknown');
    v_shape := {s}.error_fingerprint(NEW.errors -> -1 ->> 'message');
    INSERT INTO {s}.dead_letters (job_id, group_key, kind, code, fingerprint, queue, finished_at)
    VALUES (NEW.id, {s}.dead_group_key(NEW.kind, v_code, v_shape), NEW.kind, v_code, v_shape,
            NEW.queue, coalesce(NEW.finished_at, now()))
    ON CONFLICT (job_id) DO UPDATE SET
        group_key = excluded.group_key, kind = excluded.kind, code = excluded.code,
        fingerprint = excluded.fingerprint, queue = excluded.queue,
        finished_at = excluded.finished_at;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {s}.jobs_dead_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {s}.dead_letters;
    RETURN NULL;
END
$$;
