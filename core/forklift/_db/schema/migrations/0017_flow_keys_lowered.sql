-- forklift schema, version 17: a hand-off counts a key's holders only after its limit fell.
--
-- The keyed hand-off (forklift._features.flow.handoff) counted the running jobs of every value it passed
-- a slot for, to honour a limit lowered since those jobs were claimed. A hand-off keeps each
-- value's count what it was and every claim admits within the limit it reads, so a count can
-- exceed the limit only after the limit fell. flow_keys.lowered_at marks those keys (set by
-- the trigger below, cleared by the leader once every value of the key is within its limit);
-- the hand-off counts only their values. Measured in `forklift bench` flow_keyed
-- (pg_stat_statements): the hand-off's server time fell from 24.6-26 to 22 us a row (a row
-- settled or taken); the keyed rate rose 2-3%, within the run-to-run noise.

ALTER TABLE {s}.flow_keys ADD COLUMN lowered_at timestamptz;

\ir ../functions/flow_keys_lowered_v1.sql

CREATE TRIGGER flow_keys_lowered BEFORE INSERT OR UPDATE OF concurrency ON {s}.flow_keys
    FOR EACH ROW EXECUTE FUNCTION {s}.flow_keys_lowered();

-- A limit lowered before this version: its values may still be above it.
UPDATE {s}.flow_keys SET lowered_at = now() WHERE concurrency IS NOT NULL;
