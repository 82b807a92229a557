CREATE TABLE `api_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`role` text NOT NULL,
	`token_hash` text NOT NULL,
	`name` text DEFAULT '' NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_tokens_hash_uq` ON `api_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `api_tokens_ws_idx` ON `api_tokens` (`workspace_id`);--> statement-breakpoint
CREATE TABLE `decision_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`target_url` text NOT NULL,
	`event_id` text NOT NULL,
	`workspace_id` text NOT NULL,
	`item_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`delivered_at` integer,
	`last_error` text
);
--> statement-breakpoint
CREATE INDEX `decision_events_due_idx` ON `decision_events` (`delivered_at`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `decision_events_target_item_idx` ON `decision_events` (`target_url`,`item_id`,`id`);--> statement-breakpoint
CREATE TABLE `event_targets` (
	`url` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL,
	`disabled_at` integer
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`source` text NOT NULL,
	`delivery_id` text NOT NULL,
	`event` text NOT NULL,
	`received_at` integer NOT NULL,
	PRIMARY KEY(`source`, `delivery_id`)
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_received_idx` ON `webhook_deliveries` (`received_at`);