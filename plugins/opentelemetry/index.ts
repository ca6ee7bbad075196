/** Kong's `opentelemetry` plugin: OTLP/HTTP traces of each request, and trace context propagation to the upstream. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { propagationOf, type Propagation } from './propagation.ts';
import { checkConfig, configSchema, type OpenTelemetryConfig } from './schema.ts';

const opentelemetry: PluginDefinition<OpenTelemetryConfig, Propagation> = {
  name: 'opentelemetry',
  version: '0.1.0',
  // Kong's PRIORITY: after the authentication plugins, before prometheus (13).
  priority: 14,
  configSchema,
  checkConfig,
  prepare: propagationOf,
  // Each process sends its own requests' spans; nothing is shared.
  multiProcess: true,
  create: createRuntime,
};

export default opentelemetry;
