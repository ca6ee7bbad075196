/** Kong's `correlation-id` plugin: an id per request, in a header upstream, in the log, and optionally back downstream. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type CorrelationIdConfig } from './schema.ts';

const correlationId: PluginDefinition<CorrelationIdConfig> = {
  name: 'correlation-id',
  version: '0.1.0',
  // Kong's PRIORITY: first of all, so every other plugin and every answer sees the id.
  priority: 100001,
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default correlationId;
