/** Kong's request-size-limiting config (kong/plugins/request-size-limiting/schema.lua). */
import type { Infer, RecordSchema } from '../../src/pdk/index.ts';

/** Bytes per unit of `allowed_payload_size` (Kong's unit_multiplication_factor: binary kilo and mega). */
export const UNIT_BYTES = { megabytes: 2 ** 20, kilobytes: 2 ** 10, bytes: 1 } as const;

export const configSchema = {
  type: 'record',
  fields: {
    allowed_payload_size: { type: 'integer', default: 128 },
    size_unit: { type: 'string', required: true, default: 'megabytes', one_of: ['megabytes', 'kilobytes', 'bytes'] },
    require_content_length: { type: 'boolean', required: true, default: false },
  },
} as const satisfies RecordSchema;

export type RequestSizeLimitingConfig = Infer<typeof configSchema>;
