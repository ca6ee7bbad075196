/** Kong's `file-log` plugin: every request, as Kong's log serializer describes it, appended to a file as one JSON line. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type FileLogConfig } from './schema.ts';

const fileLog: PluginDefinition<FileLogConfig> = {
  name: 'file-log',
  version: '0.1.0',
  // Kong's PRIORITY: among the last, so the line shows what every other plugin did.
  priority: 9,
  // Each process appends whole lines to the file (O_APPEND); nothing else is shared.
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default fileLog;
