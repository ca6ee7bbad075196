/** The plugin runtime: one metering service per process, answering every request under its routes. */
import type { PluginApi, PluginRuntime } from '../../src/pipeline/plugin-api.ts';
import { MeteringHttp } from './http.ts';
import type { MeteringConfig } from './schema.ts';
import { MeteringService } from './service.ts';

export async function createRuntime(api: PluginApi): Promise<PluginRuntime<MeteringConfig>> {
  const service = new MeteringService(api);
  await service.open();
  const http = new MeteringHttp(service);
  return {
    configure: (view) => service.configure(view),
    access: (ctx, config) => http.handle(ctx, config),
    close: () => service.close(),
  };
}
