-- forklift schema, version 18: the autoscaling signal, one number per queue.
--
-- `SELECT {s}.desired_workers('mail')` is what a KEDA `postgresql` scaler queries; the
-- Prometheus gauge forklift_queue_desired_workers and `forklift queues scale` read the same
-- function (functions/scale_v1.sql says how the number is made). Nothing else changes: no
-- table, no trigger, no index.

\ir ../functions/scale_v1.sql
