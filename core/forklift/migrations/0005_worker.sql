-- forklift schema, version 5: what the worker's services record on their rows.

-- Restarts of the worker's services (name -> count), written with the heartbeat.
ALTER TABLE {s}.workers ADD COLUMN restarts jsonb NOT NULL DEFAULT '{}';
