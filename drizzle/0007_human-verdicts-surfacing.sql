CREATE TABLE `human_verdicts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workspace_id` text NOT NULL,
	`item_id` text NOT NULL,
	`question_set` text NOT NULL,
	`question_key` text NOT NULL,
	`verdict` text NOT NULL,
	`value` text,
	`state_hash` text NOT NULL,
	`state_version` integer NOT NULL,
	`state_parts` text NOT NULL,
	`decision_id` integer,
	`author` text NOT NULL,
	`note` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `human_verdicts_key_idx` ON `human_verdicts` (`item_id`,`question_set`,`question_key`,`id`);--> statement-breakpoint
CREATE INDEX `human_verdicts_ws_idx` ON `human_verdicts` (`workspace_id`,`question_set`,`id`);--> statement-breakpoint
CREATE TABLE `surfacing_changes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workspace_id` text NOT NULL,
	`item_id` text NOT NULL,
	`question_set` text NOT NULL,
	`question_key` text NOT NULL,
	`surfaced` integer NOT NULL,
	`flip` integer NOT NULL,
	`probability` real NOT NULL,
	`cause` text NOT NULL,
	`state_hash` text NOT NULL,
	`changed_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `surfacing_changes_key_idx` ON `surfacing_changes` (`item_id`,`question_set`,`question_key`,`id`);--> statement-breakpoint
CREATE INDEX `surfacing_changes_ws_idx` ON `surfacing_changes` (`workspace_id`,`question_set`,`changed_at`);