/**
 * The runtime: each request's entry, Kong's serialized request as JSON, sent as one datagram to the
 * configured host and port, after the request. One socket per process and address family; a datagram
 * larger than UDP carries (about 64 KiB) or one the system refuses is lost, with one error logged until
 * sending works again, and counted.
 */
import dgram from 'node:dgram';
import { isIPv6 } from 'node:net';
import type { PluginApi, PluginRuntime } from '../../src/pdk/index.ts';
import type { UdpLogConfig } from './schema.ts';

export function createRuntime(api: PluginApi): PluginRuntime<UdpLogConfig> {
  const sockets = new Map<'udp4' | 'udp6', dgram.Socket>();
  const lost = api.metrics.counter({ name: 'tollgate_udp_log_lost_datagrams_total', help: 'Log entries the system refused to send', labelNames: ['destination'] });
  let failing = false;

  const socketFor = (host: string) => {
    const family = isIPv6(host) ? 'udp6' : 'udp4';
    let socket = sockets.get(family);
    if (!socket) {
      socket = dgram.createSocket(family);
      socket.on('error', (err) => api.log.error({ err }, 'udp-log: socket error'));
      socket.unref();
      sockets.set(family, socket);
    }
    return socket;
  };

  return {
    log(ctx, config) {
      const { host, port } = config;
      socketFor(host).send(JSON.stringify(ctx.serialize()), port, host, (err) => {
        if (!err) {
          failing = false;
          return;
        }
        lost.inc({ destination: `${host}:${port}` });
        if (!failing) api.log.error({ err, destination: `${host}:${port}` }, `udp-log: could not send data to ${host}:${port}: ${err.message}`);
        failing = true;
      });
    },

    async close() {
      await Promise.all([...sockets.values()].map((socket) => new Promise<void>((resolve) => socket.close(() => resolve()))));
    },
  };
}
