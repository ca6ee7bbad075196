/**
 * Kong's `response-ratelimiting` plugin: limits per named usage (`video`, `image`) that the upstream
 * reports in an `X-Kong-Limit` response header, per consumer, credential or client address, counted per
 * node (`policy: local`) or across every node sharing the store (`cluster`), with rate-limiting's counters.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { refuseRedisPolicy } from '../rate-limiting/public.ts';
import { createRuntime, prepareLimits, type UsageLimits } from './handler.ts';
import { configSchema, type ResponseRateLimitingConfig } from './schema.ts';

const responseRateLimiting: PluginDefinition<ResponseRateLimitingConfig, UsageLimits[]> = {
  name: 'response-ratelimiting',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication and rate-limiting (910), so limits can be per consumer.
  priority: 900,
  multiProcess: true,
  configSchema,
  checkConfig: refuseRedisPolicy,
  prepare: prepareLimits,
  create: createRuntime,
};

export default responseRateLimiting;
