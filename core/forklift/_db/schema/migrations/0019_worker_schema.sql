-- forklift schema, version 19: each worker records the schema it was built for and the oldest
-- it can work with, so `forklift migrate` can name the live workers a migration would break.
--
-- A migration that older workers cannot work with says so in its header with a line
-- `-- workers: N` (workers built for schema N or later keep working); `forklift migrate`
-- refuses it, without --force, while a live worker built for an older schema is registered.
-- This one only adds nullable columns: workers of every older version keep working (a worker
-- from before it leaves both empty, and is taken as built for version 18).

ALTER TABLE {s}.workers ADD COLUMN schema_built integer;
ALTER TABLE {s}.workers ADD COLUMN schema_min integer;
