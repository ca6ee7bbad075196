/** How this gateway reaches PostgreSQL: the settings, the connection config, and what a lost connection looks like. */
import pg from 'pg';
import { StoreUnavailableError } from '../errors.ts';

export interface PostgresSettings {
  host: string;
  port: number;
  user: string;
  password: string | null;
  database: string;
  schema: string;
  ssl: boolean;
  /** Verify the server's certificate (with the system's CAs and NODE_EXTRA_CA_CERTS). */
  sslVerify: boolean;
  /** How stale a cache may get: notices arrive sooner, and a lost notice connection is noticed within it. */
  updateFrequencyMs: number;
  /** Connections this process keeps (default 10). */
  poolSize?: number;
}

const CONNECT_TIMEOUT_MS = 5_000;
/** A statement that takes longer is abandoned by the client (the request that made it fails; nothing hangs for ever). */
const QUERY_TIMEOUT_MS = 30_000;
/**
 * The server ends a session left idle inside a transaction this long: a process paused (SIGSTOP, a
 * frozen VM) in the middle of a transaction releases its locks instead of holding every other node
 * (a fenced write holds the metering lease's lock) until it wakes. This gateway never waits on anything
 * but the database inside a transaction.
 */
const IDLE_IN_TRANSACTION_MS = 5_000;

/** node-postgres connection settings from the gateway's. */
export function connectionConfig(s: PostgresSettings): pg.ClientConfig {
  return {
    host: s.host,
    port: s.port,
    user: s.user,
    password: s.password ?? undefined,
    database: s.database,
    ssl: s.ssl ? { rejectUnauthorized: s.sslVerify } : false,
    application_name: 'tollgate',
    // Writes without `sync` commit asynchronously; `sync` ones switch it on for their transaction.
    options: `-c synchronous_commit=off -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_MS}`,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
  };
}

export function unreachable(s: PostgresSettings, err: unknown, doing = 'connect to'): StoreUnavailableError {
  return new StoreUnavailableError(`cannot ${doing} PostgreSQL at ${s.host}:${s.port} (database ${s.database}, user ${s.user}): ${(err as Error).message}`, { cause: err });
}

/** A connection of its own (migrations, store:copy, locks), or a StoreUnavailableError saying where it was looked for. */
export async function connectedClient(settings: PostgresSettings): Promise<pg.Client> {
  const client = new pg.Client(connectionConfig(settings));
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => undefined);
    throw unreachable(settings, err);
  }
}

export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  // Class 08 (connection exception), 57P01-03 (shutdown), class 53 (insufficient resources: too many
  // connections, disk full, out of memory; retrying later is right), or a Node socket error.
  return code === undefined || code.startsWith('08') || code.startsWith('57P') || code.startsWith('53') || code.startsWith('E');
}
