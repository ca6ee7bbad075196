/** Kong's `jwt` plugin on Tollgate's plugin API: JSON Web Tokens signed with a consumer's secret or key. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareChallenges, type Challenges } from './handler.ts';
import { configSchema, secretEntity, type JwtConfig } from './schema.ts';

const jwt: PluginDefinition<JwtConfig, Challenges> = {
  name: 'jwt',
  version: '0.1.0',
  priority: 1450,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  entities: [secretEntity],
  prepare: prepareChallenges,
  create: createRuntime,
};

export default jwt;
