-- forklift schema, version 24: a job's tenant is found by index, for fair share and operators.
--
-- jobs_tenant_fair_idx: the waiting unkeyed jobs that carry a tenant, per queue and kind, by
-- the partition a first key named `tenant` would give them (then in claim order). A fair
-- queue's claim walks it as it walks jobs_keyed_idx, one probe a partition, so such jobs take
-- turns by tenant; a keyed job stays out of it (its first key is its partition).
-- jobs_tenant_idx: every job that names a tenant, newest first, for `jobs list --tenant`, the
-- console's `tenant:` filter and the bulk actions that take it. A job that names no tenant
-- enters neither (their predicates are false for it).
--
-- Both only add indexes: workers of every older version keep working.

-- concurrently
CREATE INDEX jobs_tenant_fair_idx ON {s}.jobs (queue, kind, ('tenant' || chr(31) || tenant),
    priority, run_at, id) WHERE state = 'available' AND keys IS NULL AND tenant IS NOT NULL;
-- concurrently
CREATE INDEX jobs_tenant_idx ON {s}.jobs (tenant, id) WHERE tenant IS NOT NULL;
