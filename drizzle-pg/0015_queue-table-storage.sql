-- decision_jobs is a queue: every claim updates a row and every finish deletes one (DESIGN §3.5
-- "The queue table's storage"). Room left on each page (fillfactor 70) keeps the claim's update
-- HOT (it changes no indexed column), so it adds no entry to the six indexes; and autovacuum
-- runs after a fixed 2,000 dead rows, without cost delay, rather than after 20 % of the table,
-- so the finished jobs' dead entries at the head of decision_jobs_claim_order_idx, which every
-- claim walks past, stay few however large the backlog.
ALTER TABLE "decision_jobs" SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_cost_delay = 0);
