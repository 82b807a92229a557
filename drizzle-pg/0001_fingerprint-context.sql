DROP INDEX "item_decisions_ws_idx";--> statement-breakpoint
ALTER TABLE "item_decisions" ADD COLUMN "fingerprint_context" text;--> statement-breakpoint
CREATE INDEX "item_decisions_ws_idx" ON "item_decisions" USING btree ("workspace_id","question_set","item_id");