/** Kong's `request-transformer` plugin: the upstream request's path, method, headers, query and body rewritten by config. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { compileOperations, createRuntime, type Compiled } from './handler.ts';
import { configSchema, type RequestTransformerConfig } from './schema.ts';

const requestTransformer: PluginDefinition<RequestTransformerConfig, Compiled> = {
  name: 'request-transformer',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication and rate limiting, so they see the request as the client sent it.
  priority: 801,
  multiProcess: true,
  configSchema,
  prepare: compileOperations,
  create: createRuntime,
};

export default requestTransformer;
