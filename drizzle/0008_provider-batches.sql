CREATE TABLE `batch_requests` (
	`batch_id` text NOT NULL,
	`custom_id` text NOT NULL,
	`workspace_id` text NOT NULL,
	`item_id` text NOT NULL,
	`plan` text NOT NULL,
	PRIMARY KEY(`batch_id`, `custom_id`)
);
--> statement-breakpoint
CREATE TABLE `provider_batches` (
	`id` text PRIMARY KEY NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`provider_batch_id` text,
	`status` text NOT NULL,
	`request_count` integer NOT NULL,
	`created_at` integer NOT NULL,
	`submitted_at` integer,
	`expires_at` integer,
	`ended_at` integer,
	`polled_at` integer,
	`outcome` text
);
--> statement-breakpoint
CREATE INDEX `provider_batches_status_idx` ON `provider_batches` (`status`,`created_at`);--> statement-breakpoint
ALTER TABLE `decision_jobs` ADD `batch_id` text;--> statement-breakpoint
CREATE INDEX `decision_jobs_batch_idx` ON `decision_jobs` (`batch_id`);