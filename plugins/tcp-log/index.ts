/** Kong's `tcp-log` plugin: every request, as Kong's log serializer describes it, sent over TCP (or TLS) as one JSON line. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type TcpLogConfig } from './schema.ts';

const tcpLog: PluginDefinition<TcpLogConfig> = {
  name: 'tcp-log',
  version: '0.1.0',
  // Kong's PRIORITY.
  priority: 7,
  // Each process keeps its own connections; nothing is shared.
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default tcpLog;
