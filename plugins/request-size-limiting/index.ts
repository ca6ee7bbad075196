/** Kong's `request-size-limiting` plugin: a most size for request bodies, declared or chunked. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { allowedBytes, createRuntime } from './handler.ts';
import { configSchema, type RequestSizeLimitingConfig } from './schema.ts';

const requestSizeLimiting: PluginDefinition<RequestSizeLimitingConfig, number> = {
  name: 'request-size-limiting',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication and ip-restriction, before acl and rate limiting.
  priority: 951,
  multiProcess: true,
  configSchema,
  prepare: allowedBytes,
  create: createRuntime,
};

export default requestSizeLimiting;
