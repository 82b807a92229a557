CREATE TABLE "item_actions" (
	"item_id" text NOT NULL,
	"question_set" text NOT NULL,
	"question_key" text NOT NULL,
	"workspace_id" text NOT NULL,
	"want" text,
	"source" text,
	"decision_id" bigint,
	"proposal" text,
	"proposal_reason" text,
	"proposal_decision_id" bigint,
	"queued" text,
	"applied" text,
	"commented_at" bigint,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "item_actions_item_id_question_set_question_key_pk" PRIMARY KEY("item_id","question_set","question_key")
);
--> statement-breakpoint
ALTER TABLE "decision_events" ADD COLUMN "kind" text DEFAULT 'webhook' NOT NULL;--> statement-breakpoint
CREATE INDEX "item_actions_ws_idx" ON "item_actions" USING btree ("workspace_id","question_set","question_key");