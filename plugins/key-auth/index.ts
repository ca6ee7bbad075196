/** Kong's `key-auth` plugin on Tollgate's plugin API: API keys in a header, the query or the body, hashed at rest. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareChallenge } from './handler.ts';
import { configSchema, credentialEntity, type KeyAuthConfig } from './schema.ts';

const keyAuth: PluginDefinition<KeyAuthConfig, string> = {
  name: 'key-auth',
  version: '0.1.0',
  priority: 1250,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  entities: [credentialEntity],
  prepare: prepareChallenge,
  create: createRuntime,
};

export default keyAuth;
