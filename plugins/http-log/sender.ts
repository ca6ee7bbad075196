/**
 * The queue of one http-log destination: the core's persistent queue (Kong's batching, retries and
 * max_entries, on disk and shared by the node's processes), sending each batch as Kong's handler does:
 * one entry as a JSON object when `max_batch_size` is 1, else a JSON array; `Content-Type` from the
 * config, `Authorization: Basic` from the URL's userinfo, then the configured headers. A 2xx answer
 * delivers the batch; anything else, or no answer within `timeout`, is retried; a batch still
 * undelivered after `max_retry_time` is dropped with Kong's log line.
 */
import type { Logger } from 'pino';
import { Pool } from 'undici';
import { boundedText, PersistentQueue, type QueueClaim, type QueueCounters, type QueueSettings, type Store } from '../../src/pdk/index.ts';

/** What a destination's sends need, made from an instance's config once (prepare). */
export interface Destination {
  queue: QueueSettings;
  /** Milliseconds one send may take. */
  timeout: number;
  keepalive: number;
  method: string;
  /** The endpoint without its userinfo. */
  url: URL;
  /** Content-Type, Authorization from the userinfo, then the configured headers. */
  headers: Record<string, string>;
}

/** How much of a refusing answer's body a log line shows. */
const MAX_BODY_SHOWN = 1000;

/** A send that failed: the endpoint could not be reached, or answered other than 2xx. */
class LogDeliveryError extends Error {
  override readonly name = 'LogDeliveryError';
  readonly code = 'HTTP_LOG_ERR_DELIVERY';
}

export class HttpLogQueue extends PersistentQueue<Destination> {
  private pool: Pool | undefined;
  private poolKey = '';

  constructor(name: string, store: Store, destination: Destination, counters: QueueCounters, log: Logger) {
    super(name, store, destination, counters, log, 'http-log');
    this.connect();
  }

  override reconfigure(destination: Destination): boolean {
    super.reconfigure(destination);
    this.connect();
    return true;
  }

  /** A new connection pool only when the connection settings changed. */
  private connect(): void {
    const { url, keepalive, timeout } = this.settings;
    const key = `${url.origin}|${keepalive}|${timeout}`;
    if (key === this.poolKey) return;
    const previous = this.pool;
    this.poolKey = key;
    const idle = Math.max(1, keepalive);
    // Kong's http-log sends with ssl_verify = false.
    this.pool = new Pool(url.origin, {
      keepAliveTimeout: idle,
      keepAliveMaxTimeout: idle,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      connect: { rejectUnauthorized: false, timeout },
    });
    // Connection errors reach each request; the pool's own event needs a listener.
    this.pool.on('connectionError', () => {});
    void previous?.close().catch(() => {});
  }

  protected async post(entries: string, count: number, stop: AbortSignal): Promise<Error | undefined> {
    const { url, method, headers, timeout, queue } = this.settings;
    const body = queue.max_batch_size === 1 && count === 1 ? entries : `[${entries.replaceAll('\n', ',')}]`;
    const where = `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
    try {
      const response = await this.pool!.request({
        method: method as 'POST',
        path: url.pathname + url.search,
        headers,
        body,
        signal: AbortSignal.any([stop, AbortSignal.timeout(timeout)]),
      });
      const text = await boundedText(response.body, MAX_BODY_SHOWN);
      if (response.statusCode < 300) return undefined;
      return new LogDeliveryError(`request to ${where} returned status code ${response.statusCode} and body ${text}`);
    } catch (err) {
      return new LogDeliveryError(`failed request to ${where}: ${(err as Error).message}`, { cause: err });
    }
  }

  protected async expired(claim: QueueClaim, failure: Error): Promise<void> {
    if (!(await this.disk.complete(claim))) return;
    const { count } = claim.state;
    this.counters.dropped('retry_time', count);
    this.log.error({ queue: this.name, err: failure }, `queue ${this.name}: could not send entries due to max_retry_time exceeded. ${count} queue entries were lost`);
  }

  protected override closeTransport(): Promise<void> {
    return this.pool?.close().catch(() => {}) ?? Promise.resolve();
  }
}
