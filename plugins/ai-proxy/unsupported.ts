/** What Kong's ai-proxy config accepts and this gateway cannot serve (PluginDefinition.checkConfig). */
import type { Issue } from '../../src/pdk/index.ts';
import { driverFor } from './providers/index.ts';
import type { AiProxyConfig } from './schema.ts';

/** What Kong accepts and this gateway cannot serve, refused when the config loads, by name. */
export function unsupportedHere(config: AiProxyConfig): Issue[] {
  const { provider, options } = config.model;
  const refuse = (path: string[], message: string) => [{ path, message }];
  if (options?.llama2_format === 'raw') return refuse(['model', 'options', 'llama2_format'], "the 'raw' format is not supported by this gateway (use 'openai' or 'ollama')");
  // Another provider's or route's native format is Kong's entity checks' to refuse.
  if (config.llm_format !== 'openai' && config.llm_format === provider && config.route_type === 'llm/v1/chat') {
    return refuse(['llm_format'], `the native '${config.llm_format}' format is not supported by this gateway (use 'openai')`);
  }
  if (config.auth?.gcp_use_service_account) {
    return refuse(['auth', 'gcp_use_service_account'], 'GCP service account auth is not supported by this gateway (use an API key: auth.param_name key, or header x-goog-api-key)');
  }
  const driver = driverFor(config.model);
  if (config.route_type !== 'preserve' && !driver.routes.includes(config.route_type)) {
    return refuse(['route_type'], `provider '${provider}' does not support route_type '${config.route_type}' (Kong has no transformer for it; supported: ${driver.routes.join(', ')})`);
  }
  const problem = driver.configProblem?.(config);
  return problem ? refuse(['model', 'provider'], problem) : [];
}
