/**
 * Binds against an LDAP directory as Kong's ldap_authenticate does: connect (LDAPS, or plain then StartTLS),
 * bind as the user, keep the connection for the next bind for `keepalive` ms. Connections in TLS and plain
 * ones are kept apart (StartTLS shares the port). The whole exchange is bounded by `timeout`.
 */
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { Client, ResultCodeError } from 'ldapts';
import { LdapUnavailableError } from './errors.ts';

export interface DirectoryTarget {
  host: string;
  port: number;
  ldaps: boolean;
  startTls: boolean;
  verify: boolean;
  timeoutMs: number;
  keepaliveMs: number;
}

/** At most this many idle connections are kept per directory: enough for bursts, few enough to forget. */
const MAX_IDLE_PER_DIRECTORY = 16;
/** Node's names for a certificate it would not trust, or a handshake that failed. */
const TLS_FAILURE = /CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/;

interface Idle {
  client: Client;
  timer: NodeJS.Timeout;
}

export class Directories {
  private readonly idle = new Map<string, Idle[]>();

  /**
   * True when the directory accepts `password` for `dn`, false when it refuses it (or the TLS layer refuses
   * the directory, as Kong's failed handshake); throws LdapUnavailableError when it cannot be asked in time.
   */
  async bind(target: DirectoryTarget, dn: string, password: string): Promise<boolean> {
    const key = poolKey(target);
    const client = this.take(key) ?? this.open(target);
    let deadline: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      deadline = setTimeout(() => reject(new LdapUnavailableError(`no answer from ${where(target)} within ${target.timeoutMs} ms`)), target.timeoutMs);
    });
    try {
      // ldapts connects on the first operation: StartTLS when asked for (then only on a new connection), else the bind.
      if (target.startTls && !client.isConnected) await Promise.race([client.startTLS(tlsOptionsFor(target)), late]);
      await Promise.race([client.bind(dn, password), late]);
      this.keep(key, client, target.keepaliveMs);
      return true;
    } catch (err) {
      if (err instanceof ResultCodeError) {
        this.keep(key, client, target.keepaliveMs);
        return false;
      }
      discard(client);
      if (isTlsRefusal(err)) return false;
      if (err instanceof LdapUnavailableError) throw err;
      throw new LdapUnavailableError(`bind at ${where(target)} failed: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(deadline);
    }
  }

  async close(): Promise<void> {
    for (const idle of this.idle.values()) {
      for (const { client, timer } of idle) {
        clearTimeout(timer);
        discard(client);
      }
    }
    this.idle.clear();
  }

  private open(target: DirectoryTarget): Client {
    return new Client({
      url: `${target.ldaps ? 'ldaps' : 'ldap'}://${isIP(target.host) === 6 ? `[${target.host}]` : target.host}:${target.port}`,
      timeout: target.timeoutMs,
      connectTimeout: target.timeoutMs,
      // ldapts speaks TLS from the first byte whenever tlsOptions are given: only for LDAPS.
      ...(target.ldaps ? { tlsOptions: tlsOptionsFor(target) } : {}),
    });
  }

  private take(key: string): Client | undefined {
    const idle = this.idle.get(key);
    while (idle?.length) {
      const { client, timer } = idle.pop()!;
      clearTimeout(timer);
      if (client.isConnected) return client;
    }
    return undefined;
  }

  private keep(key: string, client: Client, keepaliveMs: number): void {
    const idle = this.idle.get(key) ?? [];
    if (keepaliveMs <= 0 || idle.length >= MAX_IDLE_PER_DIRECTORY || !client.isConnected) return discard(client);
    const entry: Idle = {
      client,
      timer: setTimeout(() => {
        idle.splice(idle.indexOf(entry), 1);
        discard(client);
      }, keepaliveMs).unref(),
    };
    idle.push(entry);
    this.idle.set(key, idle);
  }
}

/** Whether a failure is the TLS layer refusing the directory (Kong: a refused bind), not the directory being away. */
function isTlsRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && TLS_FAILURE.test(code);
}

function tlsOptionsFor(target: DirectoryTarget): ConnectionOptions {
  // SNI takes a name, never an address (RFC 6066 §3).
  return { rejectUnauthorized: target.verify, ...(isIP(target.host) ? {} : { servername: target.host }) };
}

function poolKey(target: DirectoryTarget): string {
  return `${target.host.toLowerCase()}:${target.port}:${target.ldaps ? 'ldaps' : target.startTls ? 'starttls' : 'plain'}:${target.verify}`;
}

function where(target: DirectoryTarget): string {
  return `${target.host}:${target.port}`;
}

function discard(client: Client): void {
  client.unbind().catch(() => undefined);
}
