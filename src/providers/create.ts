import { ConfigError, type Config } from '../config.js';
import type { Logger } from '../log.js';
import { AnthropicProvider, DEFAULT_ANTHROPIC_MODEL } from './anthropic.js';
import { FakeProvider } from './fake.js';
import { OpenAICompatibleProvider } from './openai-compatible.js';
import type { Provider } from './provider.js';

const PROVIDER_CHOICES =
  'anthropic (set ANTHROPIC_API_KEY), openai (set VERDICT_OPENAI_BASE_URL and --model), fake (offline, deterministic) or none (decisions off)';

/**
 * Builds the configured provider (DESIGN §9 "Configuration errors"): a misconfiguration is an
 * error at start, never a silent "off".
 * @returns the provider, or null for `none` (decisions off).
 * @throws ConfigError when no provider is chosen, or a chosen one lacks its key, URL or model.
 * @throws ProviderMisconfigured from the provider itself (a `-latest` alias, for example).
 */
export function createProvider(cfg: Config, logger: Logger): Provider | null {
  switch (cfg.provider) {
    case undefined:
      throw new ConfigError(`no provider configured: set --provider / VERDICT_PROVIDER to ${PROVIDER_CHOICES}`);
    case 'none':
      return null;
    case 'fake':
      return new FakeProvider({
        latencyMs: cfg.fakeLatencyMs,
        model: cfg.model,
        inputBudgetTokens: cfg.inputBudgetTokens,
        keepRequests: false,
      });
    case 'anthropic':
      if (!cfg.anthropicApiKey)
        throw new ConfigError('--provider anthropic needs ANTHROPIC_API_KEY in the environment');
      return new AnthropicProvider({
        apiKey: cfg.anthropicApiKey,
        baseURL: cfg.anthropicBaseUrl,
        model: cfg.model ?? DEFAULT_ANTHROPIC_MODEL,
        inputBudgetTokens: cfg.inputBudgetTokens,
        logger: logger.child({ component: 'anthropic' }),
      });
    case 'openai':
      if (!cfg.openaiBaseUrl)
        throw new ConfigError(
          '--provider openai needs VERDICT_OPENAI_BASE_URL (for example http://localhost:11434/v1)',
        );
      if (!cfg.model) throw new ConfigError("--provider openai needs --model / VERDICT_MODEL (the server's model id)");
      return new OpenAICompatibleProvider({
        baseURL: cfg.openaiBaseUrl,
        apiKey: cfg.openaiApiKey,
        model: cfg.model,
        inputBudgetTokens: cfg.inputBudgetTokens,
        logger: logger.child({ component: 'openai' }),
      });
  }
}
