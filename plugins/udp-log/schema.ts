/** Kong's udp-log config (kong/plugins/udp-log/schema.lua); Lua refused. */
import { hostProblem, LUA_FIELD, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    host: { type: 'string', required: true, len_min: 1, custom: hostProblem },
    port: { type: 'integer', required: true, between: [0, 65535] },
    /** Kong's send timeout; a datagram is handed to the system at once, so it bounds nothing here. */
    timeout: { type: 'number', required: true, default: 10_000 },
    custom_fields_by_lua: LUA_FIELD,
  },
} as const satisfies RecordSchema;

export type UdpLogConfig = Infer<typeof configSchema>;
