/** Kong's `syslog` plugin: every request, as Kong's log serializer describes it, sent to the syslog daemon as JSON. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type SyslogConfig } from './schema.ts';

const syslog: PluginDefinition<SyslogConfig> = {
  name: 'syslog',
  version: '0.1.0',
  // Kong's PRIORITY.
  priority: 4,
  // Each process runs its own logger; nothing is shared.
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default syslog;
