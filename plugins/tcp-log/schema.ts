/** Kong's tcp-log config (kong/plugins/tcp-log/schema.lua): where to send, timeouts, TLS; Lua refused. */
import { hostProblem, LUA_FIELD, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    host: { type: 'string', required: true, len_min: 1, custom: hostProblem },
    port: { type: 'integer', required: true, between: [0, 65535] },
    /** Milliseconds to connect (and to finish a TLS handshake). */
    timeout: { type: 'number', required: true, default: 10_000, between: [1, 3_600_000] },
    /** Milliseconds an idle connection is kept. */
    keepalive: { type: 'number', required: true, default: 60_000, between: [0, 3_600_000] },
    tls: { type: 'boolean', required: true, default: false },
    tls_sni: { type: 'string', len_min: 1 },
    custom_fields_by_lua: LUA_FIELD,
  },
} as const satisfies RecordSchema;

export type TcpLogConfig = Infer<typeof configSchema>;
