/** Kong's `session` plugin on Tollgate's plugin API: encrypted cookie sessions for callers another plugin authenticated. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type SessionConfig } from './schema.ts';

const session: PluginDefinition<SessionConfig> = {
  name: 'session',
  version: '0.1.0',
  priority: 1900,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  create: createRuntime,
};

export default session;
