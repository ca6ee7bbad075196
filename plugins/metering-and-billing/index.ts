/**
 * The `metering-and-billing` plugin (Kong Gateway 3.14's name and config): each proxied request, gRPC
 * call and WebSocket session becomes a `kong.api_request` CloudEvent, and an OpenAI-compatible
 * response also a pair of `kong.llm_request` token events; they go into this gateway's own metering
 * store, or through an on-disk queue to a remote OpenMeter-compatible endpoint.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { checkConfig, configSchema, type RequestMeteringConfig } from './schema.ts';

const meteringAndBilling: PluginDefinition<RequestMeteringConfig> = {
  name: 'metering-and-billing',
  version: '0.1.0',
  // A log plugin, as Kong's http-log (12): after authentication and enforcement, so the consumer is known
  // and requests those refuse are not metered.
  priority: 12,
  configSchema,
  checkConfig,
  // Its own state is each process's batch in the making, and the on-disk queue in the store (claims
  // taken with commitIf, leases any process takes over); the local path writes through metering.
  multiProcess: true,
  uses: ['metering'],
  create: createRuntime,
};

export default meteringAndBilling;
