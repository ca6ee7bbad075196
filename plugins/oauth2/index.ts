/**
 * Kong's `oauth2` plugin on Tollgate's plugin API: authorization and token endpoints answered in
 * `access`, bearer-token protection of the route, RFC 7662/7009/8414 extras, admin routes.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { credentialEntity } from './credential-schema.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type OAuth2Config } from './schema.ts';

const oauth2: PluginDefinition<OAuth2Config> = {
  name: 'oauth2',
  version: '0.1.0',
  priority: 1400,
  noConsumer: true,
  authenticates: true,
  multiProcess: true,
  configSchema,
  entities: [credentialEntity],
  create: createRuntime,
};

export default oauth2;
