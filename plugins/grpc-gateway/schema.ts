/** Kong's grpc-gateway config (kong/plugins/grpc-gateway/schema.lua): the one optional field. */
import type { Infer, RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    // A .proto file with google.api.http annotations, relative to the working directory. Without it every
    // request is refused with Kong's 400, as Kong's schema allows the field to be absent.
    proto: { type: 'string', len_min: 1 },
  },
} as const satisfies RecordSchema;

export type GrpcGatewayConfig = Infer<typeof configSchema>;
