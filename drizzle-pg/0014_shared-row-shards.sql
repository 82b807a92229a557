ALTER TABLE "decision_spend" ADD COLUMN "shard" smallint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "decision_spend" ALTER COLUMN "shard" SET DEFAULT (pg_backend_pid() % 16);--> statement-breakpoint
ALTER TABLE "job_throughput" ADD COLUMN "shard" smallint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "job_throughput" ALTER COLUMN "shard" SET DEFAULT (pg_backend_pid() % 16);--> statement-breakpoint
ALTER TABLE "decision_spend" DROP CONSTRAINT "decision_spend_hour_question_set_provider_model_outcome_pk";--> statement-breakpoint
ALTER TABLE "job_throughput" DROP CONSTRAINT "job_throughput_minute_outcome_pk";--> statement-breakpoint
ALTER TABLE "decision_spend" ADD CONSTRAINT "decision_spend_hour_question_set_provider_model_outcome_shard_pk" PRIMARY KEY("hour","question_set","provider","model","outcome","shard");--> statement-breakpoint
ALTER TABLE "job_throughput" ADD CONSTRAINT "job_throughput_minute_outcome_shard_pk" PRIMARY KEY("minute","outcome","shard");
