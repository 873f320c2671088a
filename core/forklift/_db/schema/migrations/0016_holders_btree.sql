-- forklift schema, version 16: a key value's holders are read from the running keyed jobs only.
--
-- Since version 14 the flow claim, the keyed hand-off and `forklift keys show` counted a value's
-- running jobs by a pass over jobs_running_idx, every running job of the fleet: the plain ones
-- too, and every job waiting in a worker's local buffer (state running, up to prefetch_max a
-- worker). Measured on one hand-off of 25 keyed jobs: 84 us of server time a job beside no
-- other running jobs, 140 beside 2,000 running plain jobs, 230 beside 10,000. This partial
-- btree holds only running keyed jobs, which the keys' limits bound; plain jobs never enter it
-- (its predicate is false for them), and its plain index scans mark the entries of finished jobs
-- dead as they pass, as jobs_running_idx's do.

CREATE INDEX jobs_holders_idx ON {s}.jobs (id) WHERE state = 'running' AND keys IS NOT NULL;
