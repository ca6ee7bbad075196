/** Kong's `redirect` plugin (Kong 3.9): every request of its route, service or consumer is redirected. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type RedirectConfig } from './schema.ts';

const redirect: PluginDefinition<RedirectConfig> = {
  name: 'redirect',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication, rate limiting and the transformers, before anything that calls upstream.
  priority: 779,
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default redirect;
