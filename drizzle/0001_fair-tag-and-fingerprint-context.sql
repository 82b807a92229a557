DROP INDEX `decision_jobs_claim_order_idx`;--> statement-breakpoint
ALTER TABLE `decision_jobs` ADD `fair_tag` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `decision_jobs_ws_fair_idx` ON `decision_jobs` (`workspace_id`,`priority`,`fair_tag`);--> statement-breakpoint
CREATE INDEX `decision_jobs_claim_order_idx` ON `decision_jobs` (`state`,`priority`,`fair_tag`,`enqueued_at`,`item_id`,`question_set`);--> statement-breakpoint
DROP INDEX `item_decisions_ws_idx`;--> statement-breakpoint
ALTER TABLE `item_decisions` ADD `fingerprint_context` text;--> statement-breakpoint
CREATE INDEX `item_decisions_ws_idx` ON `item_decisions` (`workspace_id`,`question_set`,`item_id`);