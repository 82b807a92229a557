/** Token usage of one provider call (tokens). Cache fields are 0 where the provider has none. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}
