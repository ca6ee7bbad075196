/** Kong's `http-log` plugin: every request, as Kong's log serializer describes it, sent to an HTTP log server in batches. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepare, type PreparedLog } from './handler.ts';
import { configSchema, type HttpLogConfig } from './schema.ts';

const httpLog: PluginDefinition<HttpLogConfig, PreparedLog> = {
  name: 'http-log',
  version: '0.1.0',
  // Kong's PRIORITY: among the last, so the entry sees what every other plugin did.
  priority: 12,
  // The queue is on disk in the shared store; claims keep two processes from sending the same batch.
  multiProcess: true,
  configSchema,
  prepare,
  create: createRuntime,
};

export default httpLog;
