/** Kong's grpc-web config (kong/plugins/grpc-web/schema.lua). */
import type { Infer, RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    // A .proto file (relative to the working directory), needed for the JSON content types only.
    proto: { type: 'string', len_min: 1 },
    // The method is looked up by the path the route's strip_path leaves, which also goes upstream.
    pass_stripped_path: { type: 'boolean' },
    allow_origin_header: { type: 'string', default: '*' },
  },
} as const satisfies RecordSchema;

export type GrpcWebConfig = Infer<typeof configSchema>;
