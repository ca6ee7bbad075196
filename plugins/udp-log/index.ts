/** Kong's `udp-log` plugin: every request, as Kong's log serializer describes it, sent as one UDP datagram. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type UdpLogConfig } from './schema.ts';

const udpLog: PluginDefinition<UdpLogConfig> = {
  name: 'udp-log',
  version: '0.1.0',
  // Kong's PRIORITY.
  priority: 8,
  // Each process sends its own datagrams; nothing is shared.
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default udpLog;
