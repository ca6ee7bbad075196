/**
 * One tcp-log destination: a connection kept open while lines keep coming (Kong's keepalive pool), each
 * request's entry written as one JSON line. Connecting, the TLS handshake (no certificate check, as
 * Kong's `sslhandshake(false, tls_sni, false)`) and writing all happen after the request; lines written
 * while it connects wait in the socket. What cannot be sent is lost, as in Kong (there is no queue):
 * one error logged until a connection works again, and counted.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { KeyedResource } from '../../src/pdk/index.ts';
import type { TcpLogConfig } from './schema.ts';

/** Bytes a socket may hold unsent (a slow or stuck server); beyond, lines are dropped. */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;

type LostLines = (reason: 'unsent' | 'backlog', count: number) => void;

export class TcpLogConnection implements KeyedResource<TcpLogConfig> {
  private socket: net.Socket | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Lines written to the current socket, lost if it fails. */
  private written = 0;
  private failing = false;

  constructor(
    private config: TcpLogConfig,
    private readonly log: Logger,
    private readonly lost: LostLines,
  ) {}

  private get where(): string {
    return `${this.config.host}:${this.config.port}`;
  }

  /** The same destination's timeouts may change; anything else is another connection. */
  reconfigure(config: TcpLogConfig): boolean {
    this.config = config;
    return true;
  }

  send(line: string): void {
    const socket = this.socket ?? this.connect();
    if (socket.writableLength > MAX_UNSENT_BYTES) return this.lost('backlog', 1);
    socket.write(line + '\n');
    this.written++;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => socket.end(), Math.max(1, this.config.keepalive));
  }

  private connect(): net.Socket {
    const { host, port, timeout } = this.config;
    const secure = this.config.tls;
    const socket = secure ? tls.connect({ host, port, servername: this.config.tls_sni ?? undefined, rejectUnauthorized: false }) : net.connect({ host, port });
    this.socket = socket;
    this.written = 0;
    // Kong's timeout bounds connecting and the handshake; an established connection waits for lines.
    socket.setTimeout(timeout, () => socket.destroy(new Error(`timed out after ${timeout} ms`)));
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      socket.setTimeout(0);
      if (this.failing) this.log.info({ destination: this.where }, `tcp-log: connected to ${this.where} again`);
      this.failing = false;
    });
    socket.on('error', (err) => {
      if (!this.failing) this.log.error({ err, destination: this.where }, `tcp-log: failed to send data to ${this.where}: ${err.message}`);
      this.failing = true;
    });
    socket.once('close', (hadError) => {
      clearTimeout(this.idleTimer);
      if (this.socket === socket) this.socket = undefined;
      if (hadError) this.lost('unsent', this.written);
    });
    return socket;
  }

  close(): Promise<void> {
    const socket = this.socket;
    clearTimeout(this.idleTimer);
    if (!socket) return Promise.resolve();
    return new Promise((resolve) => {
      socket.once('close', () => resolve());
      socket.end();
    });
  }
}
