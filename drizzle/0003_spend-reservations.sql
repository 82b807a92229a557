CREATE TABLE `decision_spend_reservations` (
	`id` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`tokens` integer NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `decision_spend_reservations_expires_idx` ON `decision_spend_reservations` (`expires_at`);