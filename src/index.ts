/**
 * `verdict`: the one public entry (DESIGN §16.1). Everything a tracker needs to embed Verdict:
 * `createVerdict`, the question constructors and `defineQuestionSet`, the production sets, the
 * error classes (all extending `VerdictError`, each with a stable `code`), and the row, outcome
 * and read types. Anything not exported here is internal and may change without notice.
 * test/api/public-api.test.ts pins this list; README "Embedding Verdict" documents it.
 */

// ---------------------------------------------------------------- the factory
export {
  createVerdict,
  VerdictWorker,
  type Verdict,
  type VerdictOptions,
  type VerdictReader,
  type VerdictWorkerOptions,
  type VerdictWorkerEvents,
  type VerdictTokens,
  type VerdictSessions,
  type ItemSetStatus,
  type VerdictGitHub,
  type OutcomeEvent,
} from './compose/verdict.js';
export type { WorkerMonitor } from './compose/run-worker.js';
export type {
  SurfacedQuery,
  SurfacedPage,
  SurfacedRow,
  ItemHistory,
  VerdictJobs,
  JobQuery,
  JobView,
} from './compose/operations-reads.js';
export type { ItemSearchQuery, ItemSearchPage, ItemSearchRow } from './compose/item-search.js';
export type { QueueView, WorkerView, BatchesView, FailingSet, ParkedJobView } from './compose/queue-view.js';
export type { SpendSeries, SpendSeriesOptions, SpendPoint, SpendWindow, DailyCapView } from './compose/spend-view.js';
export type { ThroughputOptions, ThroughputSeries } from './compose/throughput-view.js';
export type { EvalResult, EvalResultColumn } from './eval/eval-results.js';
export type { DatabaseOption } from './compose/open.js';

// ---------------------------------------------------------------- questions and sets (DESIGN §4, §6)
export {
  noul,
  choice,
  score,
  type Question,
  type NoulQuestion,
  type ChoiceQuestion,
  type ScoreQuestion,
  type Answer,
  type NoulAnswer,
  type ChoiceAnswer,
  type ScoreAnswer,
} from './decision/questions.js';
export {
  defineQuestionSet,
  type QuestionSet,
  type QuestionSetInput,
  type EligibilityRule,
  type QuestionMap,
  Registry,
} from './decision/registry.js';
export { productionSets } from './decision/production-sets.js';

// ---------------------------------------------------------------- providers (DESIGN §9)
export type { Provider, AskOptions, AskResult, Usage } from './providers/provider.js';
export type { ProviderName } from './config.js';

// ---------------------------------------------------------------- rows, writes and reads (DESIGN §2, §3, §8)
export type { OweOptions, JobRow } from './store/queue-store.js';
export type {
  WorkspaceRow,
  CollectionRow,
  CollectionSchema,
  CollectionSettings,
  FieldDef,
  ItemRow,
  CommentRow,
  LinkRow,
  ItemQuery,
  FieldScalar,
} from './store/tracker-reads.js';
export type { NewItem, ItemPatch, NewComment, NewLink, WriteResult } from './store/tracker-writes.js';
export type { TrackerStore, VerdictStore } from './store/tracker-store.js';
export type { DecisionRow } from './store/decision-store.js';
export type { NormaliseReport } from './store/input-rules.js';
export type {
  DecisionView,
  StaleReason,
  Surfacing,
  VerdictView,
  WorkspaceFlag,
  FlappingKey,
  HistoryEntry,
} from './reads/reads.js';

// ---------------------------------------------------------------- people in the loop (DESIGN §8.1, §8.2)
export type { RecordVerdictInput, RecordedVerdict } from './compose/record-verdict.js';
export type { HumanVerdictRow, VerdictKind } from './store/verdicts.js';
export type { EvalOutcome, EvalStats } from './runner/outcome.js';
export type { WorkerSummary } from './worker/worker.js';

// ---------------------------------------------------------------- eval: gold sets (DESIGN §8.3)
export { parseGoldSet, readGoldSet, InvalidGoldSet, type GoldRow } from './eval/gold-set.js';
export {
  EvalCostNotConfirmed,
  EvalUnavailable,
  type EvalOptions,
  type EvalReport,
  type EvalColumn,
} from './eval/run-eval.js';

// ---------------------------------------------------------------- the HTTP API and the MCP server, GitHub and outbound events (DESIGN §16.2, §16.5)
export { createApiServer, type ApiServerOptions } from './server/create-api-server.js';
export { createMcpServer, type McpServerOptions, type McpHttpOptions } from './mcp/create-mcp-server.js';
export type { ApiTokenRole, ApiTokenRow, DashboardSessionRow } from './store/access-store.js';
export type { CreatedApiToken } from './access/tokens.js';
export { SESSION_IDLE_MS, SESSION_MAX_AGE_MS, type OpenedDashboardSession } from './access/sessions.js';
export {
  verifyGitHubSignature,
  type GitHubDelivery,
  type GitHubDeliveryResult,
} from './integrations/github/webhooks.js';
export {
  GitHubRequestFailed,
  type GitHubImportReport,
  type ImportGitHubRepoOptions,
  type ImportGitHubFilesOptions,
} from './integrations/github/import.js';
export { EVENT_SIGNATURE_HEADER, signEventBody, verifyEventSignature } from './integrations/events/signature.js';

// ---------------------------------------------------------------- actions in GitHub (DESIGN §17)
export type { VerdictActions } from './compose/actions-api.js';
export {
  InvalidActionsConfig,
  type ActionMode,
  type ActionsConfig,
  type KeyAction,
  type GateRule,
  type LabelRule,
} from './actions/config.js';
export type { GateStatus } from './actions/gate.js';
export type { PlanEntry, Proposal, KeyActionStatus } from './actions/actions.js';
export type { ActionsDrainReport } from './actions/actions-worker.js';
export type { GitHubWriteCounts } from './actions/github-delivery.js';

// ---------------------------------------------------------------- errors: one base class, stable codes
export {
  VerdictError,
  isVerdictError,
  InputNotFound,
  InvalidInput,
  DatabaseNotFound,
  DatabaseUnavailable,
} from './errors.js';
export { ConfigError } from './config.js';
export { InvalidQuestion } from './decision/questions.js';
export { InvalidQuestionSet } from './decision/registry.js';
export { InvalidConfigFile } from './decision/config-file.js';
export { InvalidConventionsFile } from './importers/conventions.js';
export { NotFound, InvalidWrite, Conflict, StoreFailure } from './store/store.js';
export { TransactionClosed, TransactionMisuse } from './store/transaction-errors.js';
export {
  ProviderError,
  ProviderRefusal,
  ProviderUnavailable,
  ProviderMisconfigured,
  AnswerDefect,
} from './providers/errors.js';
export { LeaseTooShort } from './worker/worker.js';
export { GraceExceeded, WorkerStateError } from './compose/verdict.js';
