/**
 * Kong's correlation-id handler.lua: a request without the header gets one, made by the configured
 * generator, sent upstream and written to the access log as `correlation_id`; with `echo_downstream` the
 * value also goes back on the answer, whoever produced it.
 */
import { randomUUID } from 'node:crypto';
import type { PluginRuntime, RequestView } from '../../src/pdk/index.ts';
import type { CorrelationIdConfig, Generator } from './schema.ts';

/** ctx.shared key: the id this request carries, for the response phase. */
const ID = 'correlation-id';

/** A connection's serial number and its request count, for the tracker generator (nginx's $connection, $connection_requests). */
interface ConnectionCount {
  serial: number;
  requests: number;
}

export function createRuntime(): PluginRuntime<CorrelationIdConfig> {
  // Kong's worker uuid and counter: one per gateway process.
  const processUuid = randomUUID();
  let counter = 0;
  let connections = 0;
  const counts = new WeakMap<object, ConnectionCount>();

  const generators: Record<Generator, (ctx: RequestView) => string> = {
    uuid: () => randomUUID(),
    'uuid#counter': () => `${processUuid}#${++counter}`,
    tracker: (ctx) => {
      let count = counts.get(ctx.connection);
      if (!count) counts.set(ctx.connection, (count = { serial: ++connections, requests: 0 }));
      count.requests++;
      return `${ctx.serverAddress}-${ctx.serverPort}-${process.pid}-${count.serial}-${count.requests}-${(Date.now() / 1000).toFixed(3)}`;
    },
  };

  return {
    access(ctx, config) {
      let id = received(ctx, config);
      if (!id) {
        id = generators[config.generator](ctx);
        ctx.setUpstreamHeader(config.header_name, id);
      }
      ctx.setLogValue('correlation_id', id);
      if (config.echo_downstream) ctx.shared[ID] = id;
    },

    response(ctx, config, head) {
      if (!config.echo_downstream) return;
      head.headers[config.header_name.toLowerCase()] = (ctx.shared[ID] as string | undefined) ?? received(ctx, config) ?? generators[config.generator](ctx);
    },
  };
}

function received(ctx: RequestView, config: CorrelationIdConfig): string | undefined {
  const value = ctx.headers[config.header_name.toLowerCase()];
  return (Array.isArray(value) ? value[0] : value) || undefined;
}
