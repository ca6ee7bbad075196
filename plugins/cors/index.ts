/** Kong's `cors` plugin: preflight answers and CORS response headers, origins as values or regexes. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { prepareOriginRule, type OriginRule } from './origins.ts';
import { configSchema, type CorsConfig } from './schema.ts';

const cors: PluginDefinition<CorsConfig, OriginRule> = {
  name: 'cors',
  version: '0.1.0',
  // Kong's PRIORITY: before authentication, so that preflights (which carry no credentials) are answered.
  priority: 2000,
  multiProcess: true,
  noConsumer: true,
  configSchema,
  prepare: prepareOriginRule,
  create: createRuntime,
};

export default cors;
