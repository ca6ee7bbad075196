/** The runtime: one connection per destination, fed in the log phase with Kong's serialized request as one JSON line. */
import { reconcileResources, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { TcpLogConnection } from './connection.ts';
import type { TcpLogConfig } from './schema.ts';

/** Instances sending to the same place over the same kind of connection share it. */
const destinationOf = (config: TcpLogConfig) => `${config.tls ? 'tls' : 'tcp'}://${config.host}:${config.port}/${config.tls_sni ?? ''}`;

export function createRuntime(api: PluginApi): PluginRuntime<TcpLogConfig> {
  const connections = new Map<string, TcpLogConnection>();
  const lost = api.metrics.counter({
    name: 'tollgate_tcp_log_lost_lines_total',
    help: 'Log lines not delivered: unsent (the connection failed), backlog (too much waited for a slow server)',
    labelNames: ['destination', 'reason'],
  });

  return {
    async configure(view) {
      const wanted = new Map(view.instances.map((instance) => [destinationOf(instance.config), instance.config]));
      await reconcileResources(connections, wanted, (destination, config) => {
        return new TcpLogConnection(config, api.log, (reason, count) => lost.inc({ destination, reason }, count));
      });
    },

    log(ctx, config) {
      connections.get(destinationOf(config))?.send(JSON.stringify(ctx.serialize()));
    },

    async close() {
      await Promise.all([...connections.values()].map((connection) => connection.close()));
    },
  };
}
