-- A failed call's spend row takes its job outcome's word (DESIGN §3): "refused" becomes "refuse",
-- "unavailable" becomes "fail". Tokens and calls are kept; a row that would meet one already under
-- the new word (same hour, set, provider and model) is added into it.
INSERT INTO "decision_spend" ("hour", "question_set", "provider", "model", "outcome", "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
SELECT "hour", "question_set", "provider", "model", CASE "outcome" WHEN 'refused' THEN 'refuse' ELSE 'fail' END, "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"
FROM "decision_spend" WHERE "outcome" IN ('refused', 'unavailable')
ON CONFLICT ("hour", "question_set", "provider", "model", "outcome") DO UPDATE SET
  "calls" = "decision_spend"."calls" + excluded."calls",
  "input_tokens" = "decision_spend"."input_tokens" + excluded."input_tokens",
  "output_tokens" = "decision_spend"."output_tokens" + excluded."output_tokens",
  "cache_read_tokens" = "decision_spend"."cache_read_tokens" + excluded."cache_read_tokens",
  "cache_write_tokens" = "decision_spend"."cache_write_tokens" + excluded."cache_write_tokens";
--> statement-breakpoint
DELETE FROM "decision_spend" WHERE "outcome" IN ('refused', 'unavailable');
