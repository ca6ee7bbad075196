/** Kong's `hmac-auth` plugin on Tollgate's plugin API: requests signed with a consumer's HMAC secret. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareChallenge } from './handler.ts';
import { configSchema, credentialEntity, type HmacAuthConfig } from './schema.ts';

const hmacAuth: PluginDefinition<HmacAuthConfig, Record<string, string>> = {
  name: 'hmac-auth',
  version: '0.1.0',
  priority: 1030,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  entities: [credentialEntity],
  prepare: prepareChallenge,
  create: createRuntime,
};

export default hmacAuth;
