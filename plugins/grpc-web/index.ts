/** Kong's `grpc-web` plugin: gRPC-Web browsers' calls to a gRPC service, in binary, base64 text or JSON. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { loadMethods } from '../grpc-gateway/public.ts';
import { createRuntime, type Methods } from './handler.ts';
import { configSchema, type GrpcWebConfig } from './schema.ts';

const grpcWeb: PluginDefinition<GrpcWebConfig, Methods> = {
  name: 'grpc-web',
  version: '0.1.0',
  // Kong's PRIORITY: among the last, after every plugin that may refuse or change the call.
  priority: 3,
  multiProcess: true,
  configSchema,
  prepare: (config) => (config.proto == null ? undefined : loadMethods(config.proto)),
  create: createRuntime,
};

export default grpcWeb;
