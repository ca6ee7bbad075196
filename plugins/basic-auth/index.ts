/** Kong's `basic-auth` plugin on Tollgate's plugin API: HTTP Basic credentials, passwords hashed at rest. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareChallenge } from './handler.ts';
import { configSchema, credentialEntity, type BasicAuthConfig } from './schema.ts';

const basicAuth: PluginDefinition<BasicAuthConfig, Record<string, string>> = {
  name: 'basic-auth',
  version: '0.1.0',
  priority: 1100,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  entities: [credentialEntity],
  prepare: prepareChallenge,
  create: createRuntime,
};

export default basicAuth;
