-- forklift schema, version 6: what operators set at run time in production.

-- Named numeric settings (health thresholds: `health.<name>`), changed by `forklift health set`
-- and audited; a name without a row has its documented default.
CREATE TABLE {s}.settings (
    name        text PRIMARY KEY,
    value       double precision NOT NULL,
    updated_by  text,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Retention windows: how long a finished job is kept, per terminal state, for every queue
-- (queue '') or one queue; seconds NULL keeps those jobs forever. The leader prunes by these,
-- `forklift retention set|show` changes and shows them (audited).
CREATE TABLE {s}.retention (
    state       text NOT NULL CHECK (state IN ('completed', 'cancelled', 'dead')),
    queue       text NOT NULL DEFAULT '',
    seconds     double precision CHECK (seconds IS NULL OR seconds >= 0),
    updated_by  text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (state, queue)
);
INSERT INTO {s}.retention (state, queue, seconds, updated_by) VALUES
    ('completed', '', 86400, 'forklift'),
    ('cancelled', '', 604800, 'forklift'),
    ('dead', '', 2592000, 'forklift');
