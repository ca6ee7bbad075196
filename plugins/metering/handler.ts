/** The plugin runtime (placeholder until the service lands): answers 503 under its route. */
import type { PluginApi, PluginRuntime } from '../../src/pipeline/plugin-api.ts';
import type { MeteringConfig } from './schema.ts';

export function createRuntime(_api: PluginApi): PluginRuntime<MeteringConfig> {
  return {
    access(ctx) {
      ctx.respond(503, { status: 503, title: 'Service Unavailable', detail: 'metering is starting' }, { 'content-type': 'application/problem+json' });
    },
  };
}
