CREATE TABLE "job_throughput" (
	"minute" bigint NOT NULL,
	"outcome" text NOT NULL,
	"jobs" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "job_throughput_minute_outcome_pk" PRIMARY KEY("minute","outcome")
);
