/**
 * Kong's `rate-limiting` plugin: requests per second…year for each consumer, credential, client address,
 * service, header value or path, counted per node (`policy: local`: in memory, or in the store under the
 * node's keys when the node has several worker processes) or across every node sharing the gateway's store
 * (`policy: cluster`), never admitting more than the limit.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareLimits, type Limits } from './handler.ts';
import { checkConfig, configSchema, type RateLimitingConfig } from './schema.ts';

const rateLimiting: PluginDefinition<RateLimitingConfig, Limits> = {
  name: 'rate-limiting',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication (910 < 1250 key-auth), so limits can be per consumer.
  priority: 910,
  multiProcess: true,
  configSchema,
  checkConfig,
  prepare: prepareLimits,
  create: createRuntime,
};

export default rateLimiting;
