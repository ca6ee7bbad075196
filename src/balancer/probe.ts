/**
 * One active health probe, as lua-resty-healthcheck runs it: connect (TLS for https/grpcs), and for
 * HTTP send `GET <http_path>` with `Connection: close` and read only the status line. A probe never
 * throws: every way it can end is an outcome the health checker counts.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { ActiveHealthchecks } from '../config/types.ts';

export type ProbeOutcome =
  | { kind: 'success' }
  | { kind: 'status'; status: number }
  | { kind: 'tcp_failure'; reason: string }
  | { kind: 'timeout' };

export interface ProbeTarget {
  host: string;
  port: number;
  /** The Host header sent (and the TLS server name when no `https_sni` is set and it is a name). */
  hostHeader: string;
}

export interface ProbeCredentials {
  /** The upstream's client certificate (mTLS), when it has one. */
  cert?: string;
  key?: string;
}

/** The status line must arrive within this many bytes; anything longer is not HTTP (reported as status 0). */
const MAX_STATUS_LINE = 8192;
const STATUS_LINE = /^HTTP\/\d+\.\d+\s+(\d+)/i;

export function probe(target: ProbeTarget, checks: ActiveHealthchecks, credentials: ProbeCredentials = {}): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const secure = checks.type === 'https' || checks.type === 'grpcs';
    const servername = checks.https_sni ?? target.hostHeader;
    const socket = secure
      ? tls.connect({
          host: target.host,
          port: target.port,
          servername: net.isIP(servername) ? undefined : servername,
          rejectUnauthorized: checks.https_verify_certificate,
          ...credentials,
        })
      : net.connect({ host: target.host, port: target.port });
    let settled = false;
    const finish = (outcome: ProbeOutcome) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(outcome);
    };
    // Kong's timeout bounds each step (connect, send, receive); 0 takes its default of one second.
    socket.setTimeout((checks.timeout || 1) * 1000, () => finish({ kind: 'timeout' }));
    socket.once('error', (err) => finish({ kind: 'tcp_failure', reason: err.message }));
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      if (checks.type === 'tcp') return finish({ kind: 'success' });
      socket.write(requestHead(target, checks));
      readStatus(socket, (status) => finish({ kind: 'status', status }));
    });
    socket.once('close', () => finish({ kind: 'tcp_failure', reason: 'connection closed before the status line' }));
  });
}

function requestHead(target: ProbeTarget, checks: ActiveHealthchecks): string {
  let head = `GET ${checks.http_path} HTTP/1.1\r\nHost: ${target.hostHeader}\r\nConnection: close\r\n`;
  for (const [name, values] of Object.entries(checks.headers ?? {})) for (const value of values) head += `${name}: ${value}\r\n`;
  return head + '\r\n';
}

/** Calls back with the status of the first line, or 0 when it is not an HTTP status line. */
function readStatus(socket: net.Socket, done: (status: number) => void): void {
  let seen = '';
  socket.on('data', (chunk: Buffer) => {
    seen += chunk.toString('latin1');
    const end = seen.indexOf('\r\n');
    if (end === -1 && seen.length < MAX_STATUS_LINE) return;
    const match = STATUS_LINE.exec(end === -1 ? seen : seen.slice(0, end));
    done(match ? Number(match[1]) : 0);
  });
}
