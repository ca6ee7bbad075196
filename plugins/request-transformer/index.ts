/** Kong's `request-transformer` plugin: the upstream request's path, method, headers, query and body rewritten by config. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type RequestTransformerConfig } from './schema.ts';

const requestTransformer: PluginDefinition<RequestTransformerConfig> = {
  name: 'request-transformer',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication and rate limiting, so they see the request as the client sent it.
  priority: 801,
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default requestTransformer;
