CREATE TABLE "api_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"role" text NOT NULL,
	"token_hash" text NOT NULL,
	"name" text DEFAULT '' NOT NULL,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint
);
--> statement-breakpoint
CREATE TABLE "decision_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "decision_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"target_url" text NOT NULL,
	"event_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"item_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" text NOT NULL,
	"created_at" bigint NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"lease_owner" text,
	"lease_expires_at" bigint,
	"delivered_at" bigint,
	"last_error" text
);
--> statement-breakpoint
CREATE TABLE "event_targets" (
	"url" text PRIMARY KEY NOT NULL,
	"created_at" bigint NOT NULL,
	"disabled_at" bigint
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"source" text NOT NULL,
	"delivery_id" text NOT NULL,
	"event" text NOT NULL,
	"received_at" bigint NOT NULL,
	CONSTRAINT "webhook_deliveries_source_delivery_id_pk" PRIMARY KEY("source","delivery_id")
);
--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_tokens_hash_uq" ON "api_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "api_tokens_ws_idx" ON "api_tokens" USING btree ("workspace_id");--> statement-breakpoint
CREATE INDEX "decision_events_due_idx" ON "decision_events" USING btree ("delivered_at","next_attempt_at");--> statement-breakpoint
CREATE INDEX "decision_events_target_item_idx" ON "decision_events" USING btree ("target_url","item_id","id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_received_idx" ON "webhook_deliveries" USING btree ("received_at");