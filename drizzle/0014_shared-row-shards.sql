PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_decision_spend` (
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
	`shard` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`hour`, `question_set`, `provider`, `model`, `outcome`, `shard`)
);
--> statement-breakpoint
INSERT INTO `__new_decision_spend`("hour", "question_set", "provider", "model", "outcome", "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens") SELECT "hour", "question_set", "provider", "model", "outcome", "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" FROM `decision_spend`;--> statement-breakpoint
DROP TABLE `decision_spend`;--> statement-breakpoint
ALTER TABLE `__new_decision_spend` RENAME TO `decision_spend`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE TABLE `__new_job_throughput` (
	`minute` integer NOT NULL,
	`outcome` text NOT NULL,
	`jobs` integer DEFAULT 0 NOT NULL,
	`shard` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`minute`, `outcome`, `shard`)
);
--> statement-breakpoint
INSERT INTO `__new_job_throughput`("minute", "outcome", "jobs") SELECT "minute", "outcome", "jobs" FROM `job_throughput`;--> statement-breakpoint
DROP TABLE `job_throughput`;--> statement-breakpoint
ALTER TABLE `__new_job_throughput` RENAME TO `job_throughput`;