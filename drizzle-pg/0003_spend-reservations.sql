CREATE TABLE "decision_spend_reservations" (
	"id" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"tokens" bigint NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "decision_spend_reservations_expires_idx" ON "decision_spend_reservations" USING btree ("expires_at");