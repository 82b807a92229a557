CREATE TABLE "collections" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"slug" text NOT NULL,
	"is_system" boolean DEFAULT false NOT NULL,
	"schema" text DEFAULT '{"fields":[]}' NOT NULL,
	"settings" text DEFAULT '{}' NOT NULL,
	"created_at" bigint NOT NULL,
	"deleted_at" bigint
);
--> statement-breakpoint
CREATE TABLE "comments" (
	"id" text PRIMARY KEY NOT NULL,
	"item_id" text NOT NULL,
	"parent_comment_id" text,
	"author" text NOT NULL,
	"body" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"deleted_at" bigint
);
--> statement-breakpoint
CREATE TABLE "decision_jobs" (
	"item_id" text NOT NULL,
	"question_set" text NOT NULL,
	"workspace_id" text NOT NULL,
	"priority" integer NOT NULL,
	"generation" integer DEFAULT 1 NOT NULL,
	"enqueued_at" bigint NOT NULL,
	"not_before" bigint NOT NULL,
	"claimed_by" text,
	"claim_token" text,
	"lease_expires_at" bigint,
	"attempts" integer DEFAULT 0 NOT NULL,
	"refusals" integer DEFAULT 0 NOT NULL,
	"abandons" integer DEFAULT 0 NOT NULL,
	"state" text DEFAULT 'owed' NOT NULL,
	"last_error" text,
	"last_error_at" bigint,
	"fair_tag" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "decision_jobs_item_id_question_set_pk" PRIMARY KEY("item_id","question_set")
);
--> statement-breakpoint
CREATE TABLE "decision_spend" (
	"hour" bigint NOT NULL,
	"question_set" text NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"outcome" text NOT NULL,
	"calls" bigint DEFAULT 0 NOT NULL,
	"input_tokens" bigint DEFAULT 0 NOT NULL,
	"output_tokens" bigint DEFAULT 0 NOT NULL,
	"cache_read_tokens" bigint DEFAULT 0 NOT NULL,
	"cache_write_tokens" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "decision_spend_hour_question_set_provider_model_outcome_pk" PRIMARY KEY("hour","question_set","provider","model","outcome")
);
--> statement-breakpoint
CREATE TABLE "item_decisions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "item_decisions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"workspace_id" text NOT NULL,
	"item_id" text NOT NULL,
	"question_set" text NOT NULL,
	"question_key" text NOT NULL,
	"kind" text NOT NULL,
	"answer" text NOT NULL,
	"confidence" double precision,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"state_hash" text NOT NULL,
	"question_hash" text NOT NULL,
	"state_version" integer NOT NULL,
	"state_parts" text NOT NULL,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"item_seq" integer NOT NULL,
	"state_truncated" boolean DEFAULT false NOT NULL,
	"evaluated_at" bigint NOT NULL,
	"rationale" text
);
--> statement-breakpoint
CREATE TABLE "item_links" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"source_id" text NOT NULL,
	"target_id" text NOT NULL,
	"link_type" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "items" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"collection_id" text NOT NULL,
	"ref" text NOT NULL,
	"title" text NOT NULL,
	"content" text DEFAULT '' NOT NULL,
	"fields" text DEFAULT '{}' NOT NULL,
	"seq" integer DEFAULT 1 NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"deleted_at" bigint
);
--> statement-breakpoint
CREATE TABLE "verdict_meta" (
	"key" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workspaces" (
	"id" text PRIMARY KEY NOT NULL,
	"slug" text NOT NULL,
	"created_at" bigint NOT NULL,
	"deleted_at" bigint
);
--> statement-breakpoint
ALTER TABLE "collections" ADD CONSTRAINT "collections_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "comments" ADD CONSTRAINT "comments_item_id_items_id_fk" FOREIGN KEY ("item_id") REFERENCES "public"."items"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "item_links" ADD CONSTRAINT "item_links_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "item_links" ADD CONSTRAINT "item_links_source_id_items_id_fk" FOREIGN KEY ("source_id") REFERENCES "public"."items"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "item_links" ADD CONSTRAINT "item_links_target_id_items_id_fk" FOREIGN KEY ("target_id") REFERENCES "public"."items"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "items" ADD CONSTRAINT "items_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "items" ADD CONSTRAINT "items_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "collections_ws_slug_uq" ON "collections" USING btree ("workspace_id","slug");--> statement-breakpoint
CREATE INDEX "comments_item_idx" ON "comments" USING btree ("item_id","created_at","id");--> statement-breakpoint
CREATE INDEX "comments_parent_idx" ON "comments" USING btree ("parent_comment_id");--> statement-breakpoint
CREATE INDEX "decision_jobs_claim_idx" ON "decision_jobs" USING btree ("state","priority","not_before","enqueued_at");--> statement-breakpoint
CREATE INDEX "decision_jobs_claim_order_idx" ON "decision_jobs" USING btree ("state","priority","fair_tag","enqueued_at","item_id","question_set");--> statement-breakpoint
CREATE INDEX "decision_jobs_ws_idx" ON "decision_jobs" USING btree ("workspace_id","question_set");--> statement-breakpoint
CREATE INDEX "decision_jobs_ws_fair_idx" ON "decision_jobs" USING btree ("workspace_id","priority","fair_tag");--> statement-breakpoint
CREATE UNIQUE INDEX "item_decisions_idem_uq" ON "item_decisions" USING btree ("item_id","question_set","question_key","state_hash","question_hash","state_version");--> statement-breakpoint
CREATE INDEX "item_decisions_latest_idx" ON "item_decisions" USING btree ("item_id","question_set","question_key","id");--> statement-breakpoint
CREATE INDEX "item_decisions_ws_idx" ON "item_decisions" USING btree ("workspace_id","question_set");--> statement-breakpoint
CREATE UNIQUE INDEX "item_links_uq" ON "item_links" USING btree ("source_id","target_id","link_type");--> statement-breakpoint
CREATE INDEX "item_links_target_idx" ON "item_links" USING btree ("target_id");--> statement-breakpoint
CREATE UNIQUE INDEX "items_ws_ref_uq" ON "items" USING btree ("workspace_id","ref");--> statement-breakpoint
CREATE INDEX "items_collection_idx" ON "items" USING btree ("collection_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "workspaces_slug_uq" ON "workspaces" USING btree ("slug");