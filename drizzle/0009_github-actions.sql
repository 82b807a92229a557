CREATE TABLE `item_actions` (
	`item_id` text NOT NULL,
	`question_set` text NOT NULL,
	`question_key` text NOT NULL,
	`workspace_id` text NOT NULL,
	`want` text,
	`source` text,
	`decision_id` integer,
	`proposal` text,
	`proposal_reason` text,
	`proposal_decision_id` integer,
	`queued` text,
	`applied` text,
	`commented_at` integer,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`item_id`, `question_set`, `question_key`)
);
--> statement-breakpoint
CREATE INDEX `item_actions_ws_idx` ON `item_actions` (`workspace_id`,`question_set`,`question_key`);--> statement-breakpoint
ALTER TABLE `decision_events` ADD `kind` text DEFAULT 'webhook' NOT NULL;