/** Kong's correlation-id config (kong/plugins/correlation-id/schema.lua). */
import { HEADER_NAME, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    // Kong declares a plain string; a name that cannot be a header would fail every request it is sent on.
    header_name: { ...HEADER_NAME, default: 'Kong-Request-ID' },
    generator: { type: 'string', default: 'uuid#counter', required: true, one_of: ['uuid', 'uuid#counter', 'tracker'] },
    echo_downstream: { type: 'boolean', required: true, default: false },
  },
} as const satisfies RecordSchema;

export type CorrelationIdConfig = Infer<typeof configSchema>;
export type Generator = CorrelationIdConfig['generator'];
