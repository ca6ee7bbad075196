/** Kong's `request-termination` plugin: the gateway answers the request itself, before any upstream. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type RequestTerminationConfig } from './schema.ts';

const requestTermination: PluginDefinition<RequestTerminationConfig> = {
  name: 'request-termination',
  version: '0.1.0',
  // Kong's PRIORITY: after every other plugin, so authentication and rate limits still apply first.
  priority: 2,
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default requestTermination;
