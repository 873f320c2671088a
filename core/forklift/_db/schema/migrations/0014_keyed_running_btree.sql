-- forklift schema, version 14: the holders of a key value are counted by the running btree.
--
-- The GIN index of running keyed jobs' values (0007) cost every keyed claim a GIN insert with
-- fastupdate off, one posting-tree descent per value (measured: 5.4 ms of a 10.5 ms hand-off of
-- 100 jobs), and a GIN index keeps the entries of finished jobs until a vacuum, so one probe
-- read thousands of dead entries (14 ms seen). The running jobs are bounded by the fleet's slots,
-- and the flow claim, the keyed hand-off and `forklift keys show` now count a value's holders
-- from jobs_running_idx, whose plain index scans mark the entries of finished jobs dead as they
-- pass. (This version was applied after 15 on a database that had 15 already: the runner applies
-- every version not yet recorded, in order.)

DROP INDEX IF EXISTS {s}.jobs_keyed_running_idx;
