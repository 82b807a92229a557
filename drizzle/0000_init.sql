CREATE TABLE `collections` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`slug` text NOT NULL,
	`is_system` integer DEFAULT false NOT NULL,
	`schema` text DEFAULT '{"fields":[]}' NOT NULL,
	`settings` text DEFAULT '{}' NOT NULL,
	`created_at` integer NOT NULL,
	`deleted_at` integer,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `collections_ws_slug_uq` ON `collections` (`workspace_id`,`slug`);--> statement-breakpoint
CREATE TABLE `comments` (
	`id` text PRIMARY KEY NOT NULL,
	`item_id` text NOT NULL,
	`parent_comment_id` text,
	`author` text NOT NULL,
	`body` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`deleted_at` integer,
	FOREIGN KEY (`item_id`) REFERENCES `items`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `comments_item_idx` ON `comments` (`item_id`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `comments_parent_idx` ON `comments` (`parent_comment_id`);--> statement-breakpoint
CREATE TABLE `decision_jobs` (
	`item_id` text NOT NULL,
	`question_set` text NOT NULL,
	`workspace_id` text NOT NULL,
	`priority` integer NOT NULL,
	`generation` integer DEFAULT 1 NOT NULL,
	`enqueued_at` integer NOT NULL,
	`not_before` integer NOT NULL,
	`claimed_by` text,
	`claim_token` text,
	`lease_expires_at` integer,
	`attempts` integer DEFAULT 0 NOT NULL,
	`refusals` integer DEFAULT 0 NOT NULL,
	`abandons` integer DEFAULT 0 NOT NULL,
	`state` text DEFAULT 'owed' NOT NULL,
	`last_error` text,
	`last_error_at` integer,
	PRIMARY KEY(`item_id`, `question_set`)
);
--> statement-breakpoint
CREATE INDEX `decision_jobs_claim_idx` ON `decision_jobs` (`state`,`priority`,`not_before`,`enqueued_at`);--> statement-breakpoint
CREATE INDEX `decision_jobs_claim_order_idx` ON `decision_jobs` (`state`,`priority`,`enqueued_at`,`item_id`,`question_set`);--> statement-breakpoint
CREATE INDEX `decision_jobs_ws_idx` ON `decision_jobs` (`workspace_id`,`question_set`);--> statement-breakpoint
CREATE TABLE `decision_spend` (
	`hour` integer NOT NULL,
	`question_set` text NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`outcome` text NOT NULL,
	`calls` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`cache_read_tokens` integer DEFAULT 0 NOT NULL,
	`cache_write_tokens` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`hour`, `question_set`, `provider`, `model`, `outcome`)
);
--> statement-breakpoint
CREATE TABLE `item_decisions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workspace_id` text NOT NULL,
	`item_id` text NOT NULL,
	`question_set` text NOT NULL,
	`question_key` text NOT NULL,
	`kind` text NOT NULL,
	`answer` text NOT NULL,
	`confidence` real,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`state_hash` text NOT NULL,
	`question_hash` text NOT NULL,
	`state_version` integer NOT NULL,
	`state_parts` text NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`item_seq` integer NOT NULL,
	`state_truncated` integer DEFAULT false NOT NULL,
	`evaluated_at` integer NOT NULL,
	`rationale` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `item_decisions_idem_uq` ON `item_decisions` (`item_id`,`question_set`,`question_key`,`state_hash`,`question_hash`,`state_version`);--> statement-breakpoint
CREATE INDEX `item_decisions_latest_idx` ON `item_decisions` (`item_id`,`question_set`,`question_key`,`id`);--> statement-breakpoint
CREATE INDEX `item_decisions_ws_idx` ON `item_decisions` (`workspace_id`,`question_set`);--> statement-breakpoint
CREATE TABLE `item_links` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`source_id` text NOT NULL,
	`target_id` text NOT NULL,
	`link_type` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`source_id`) REFERENCES `items`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`target_id`) REFERENCES `items`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `item_links_uq` ON `item_links` (`source_id`,`target_id`,`link_type`);--> statement-breakpoint
CREATE INDEX `item_links_target_idx` ON `item_links` (`target_id`);--> statement-breakpoint
CREATE TABLE `items` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`collection_id` text NOT NULL,
	`ref` text NOT NULL,
	`title` text NOT NULL,
	`content` text DEFAULT '' NOT NULL,
	`fields` text DEFAULT '{}' NOT NULL,
	`seq` integer DEFAULT 1 NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`deleted_at` integer,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `items_ws_ref_uq` ON `items` (`workspace_id`,`ref`);--> statement-breakpoint
CREATE INDEX `items_collection_idx` ON `items` (`collection_id`,`id`);--> statement-breakpoint
CREATE TABLE `verdict_meta` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `workspaces` (
	`id` text PRIMARY KEY NOT NULL,
	`slug` text NOT NULL,
	`created_at` integer NOT NULL,
	`deleted_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `workspaces_slug_uq` ON `workspaces` (`slug`);