CREATE TABLE "human_verdicts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "human_verdicts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"workspace_id" text NOT NULL,
	"item_id" text NOT NULL,
	"question_set" text NOT NULL,
	"question_key" text NOT NULL,
	"verdict" text NOT NULL,
	"value" text,
	"state_hash" text NOT NULL,
	"state_version" integer NOT NULL,
	"state_parts" text NOT NULL,
	"decision_id" bigint,
	"author" text NOT NULL,
	"note" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "surfacing_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "surfacing_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"workspace_id" text NOT NULL,
	"item_id" text NOT NULL,
	"question_set" text NOT NULL,
	"question_key" text NOT NULL,
	"surfaced" boolean NOT NULL,
	"flip" boolean NOT NULL,
	"probability" double precision NOT NULL,
	"cause" text NOT NULL,
	"state_hash" text NOT NULL,
	"changed_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "human_verdicts_key_idx" ON "human_verdicts" USING btree ("item_id","question_set","question_key","id");--> statement-breakpoint
CREATE INDEX "human_verdicts_ws_idx" ON "human_verdicts" USING btree ("workspace_id","question_set","id");--> statement-breakpoint
CREATE INDEX "surfacing_changes_key_idx" ON "surfacing_changes" USING btree ("item_id","question_set","question_key","id");--> statement-breakpoint
CREATE INDEX "surfacing_changes_ws_idx" ON "surfacing_changes" USING btree ("workspace_id","question_set","changed_at");