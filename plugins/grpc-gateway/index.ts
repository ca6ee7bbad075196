/** Kong's `grpc-gateway` plugin: REST and JSON in front of a gRPC service, from a .proto's google.api.http rules. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { loadBindings, type Bindings } from './proto.ts';
import { configSchema, type GrpcGatewayConfig } from './schema.ts';

const grpcGateway: PluginDefinition<GrpcGatewayConfig, Bindings | undefined> = {
  name: 'grpc-gateway',
  version: '0.1.0',
  // Kong's PRIORITY: after the authentication plugins, before request-size-limiting and rate limiting.
  priority: 998,
  multiProcess: true,
  configSchema,
  prepare: (config) => (config.proto == null ? undefined : loadBindings(config.proto)),
  create: createRuntime,
};

export default grpcGateway;
