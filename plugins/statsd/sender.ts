/**
 * Sends StatsD lines as Kong's statsd_logger does: over UDP one datagram a line, or lines joined by
 * newlines into datagrams of at most `udp_packet_size` bytes (a longer line goes alone); over TCP each
 * line followed by a newline, on a connection made for the request's lines (connect within 1 s, as Kong's).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { Logger } from 'pino';
import type { StatsdConfig } from './schema.ts';

/** Kong's TCP connect timeout; it also bounds the whole exchange here. */
const TCP_TIMEOUT_MS = 1000;

/** Kong's packing: lines joined while the datagram stays within `size` bytes. */
export function datagrams(lines: string[], size: number): string[] {
  if (size <= 0) return lines;
  const packets: string[] = [];
  let current = '';
  for (const line of lines) {
    if (current && current.length + 1 + line.length > size) {
      packets.push(current);
      current = line;
    } else current = current ? `${current}\n${line}` : line;
  }
  if (current) packets.push(current);
  return packets;
}

export class StatsdSender {
  /** One socket per address family, made on first use. */
  private readonly udp = new Map<dgram.SocketType, dgram.Socket>();

  constructor(private readonly log: Logger) {}

  send(config: StatsdConfig, lines: string[]): void {
    if (lines.length === 0) return;
    if (config.use_tcp) this.sendTcp(config, lines);
    else {
      const socket = this.udpSocket(net.isIPv6(config.host) ? 'udp6' : 'udp4');
      for (const packet of datagrams(lines, config.udp_packet_size)) socket.send(packet, config.port, config.host, (err) => err && this.failed(config, err));
    }
  }

  close(): void {
    for (const socket of this.udp.values()) socket.close();
    this.udp.clear();
  }

  private udpSocket(type: dgram.SocketType): dgram.Socket {
    let socket = this.udp.get(type);
    if (!socket) {
      socket = dgram.createSocket(type);
      socket.on('error', (err) => this.log.error({ err: err.message }, 'statsd: UDP socket error'));
      // Metrics in flight never keep the process alive.
      socket.unref();
      this.udp.set(type, socket);
    }
    return socket;
  }

  private sendTcp(config: StatsdConfig, lines: string[]): void {
    const socket = net.connect({ host: config.host, port: config.port });
    socket.setTimeout(TCP_TIMEOUT_MS, () => socket.destroy(new Error('timed out')));
    socket.on('error', (err) => this.failed(config, err));
    socket.end(lines.map((l) => l + '\n').join(''));
  }

  private failed(config: StatsdConfig, err: Error): void {
    this.log.error({ err: err.message }, `[statsd] failed to send data to ${config.host}:${config.port}`);
  }
}
