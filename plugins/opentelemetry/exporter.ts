/**
 * Spans on their way to an OTLP/HTTP receiver: held in memory per plugin instance (Kong's queue per
 * instance), sent `max_batch_size` at a time once a batch is full or `max_coalescing_delay` after its first
 * span, one batch in flight at a time; a failed batch is retried with Kong's backoff until `max_retry_time`,
 * then dropped with a log line. At most `max_entries` spans wait: beyond that the oldest go (Kong's rule).
 */
import http from 'node:http';
import https from 'node:https';
import type { Logger } from 'pino';
import { FullQueueLog, retryDelayMs, type QueueSettings } from '../../src/pdk/index.ts';
import { encodeTraces, type AttributeValue, type Span } from './otlp.ts';

/** Where and how a batch is sent (from the instance's config when its last span was added). */
export interface ExportTarget {
  endpoint: string;
  headers: Record<string, string>;
  resource: Record<string, AttributeValue>;
  connectTimeoutMs: number;
  sendTimeoutMs: number;
  readTimeoutMs: number;
  queue: QueueSettings;
}

/** A receiver's answer is read this far at most: only its status matters. */
const MAX_ANSWER_BYTES = 64 * 1024;

export class SpanQueue {
  private readonly spans: Span[] = [];
  private target: ExportTarget | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private closed = false;
  private readonly fullLog: FullQueueLog;

  constructor(private readonly name: string, private readonly log: Logger, dropped: (count: number) => void) {
    this.fullLog = new FullQueueLog(name, log, dropped);
  }

  add(spans: Span[], target: ExportTarget): void {
    this.target = target;
    this.spans.push(...spans);
    const excess = this.spans.length - target.queue.max_entries;
    if (excess > 0) this.spans.splice(0, excess);
    this.fullLog.dropped(excess);
    if (this.spans.length >= target.queue.max_batch_size) this.sendBatches();
    else this.timer ??= setTimeout(() => this.sendBatches(), target.queue.max_coalescing_delay * 1000);
  }

  /** Sends what waits, one attempt a batch, and stops. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.sending;
    if (this.spans.length > 0) await this.drain();
  }

  private sendBatches(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending || this.closed) return;
    this.sending = this.drain().finally(() => (this.sending = undefined));
  }

  private async drain(): Promise<void> {
    while (this.spans.length > 0 && this.target) {
      const target = this.target;
      const batch = this.spans.splice(0, target.queue.max_batch_size);
      await this.deliver(batch, target);
    }
  }

  private async deliver(batch: Span[], target: ExportTarget): Promise<void> {
    const body = encodeTraces(batch, target.resource);
    const giveUpAt = Date.now() + target.queue.max_retry_time * 1000;
    for (let attempt = 0; ; attempt++) {
      try {
        await post(target, body);
        this.fullLog.resumed();
        return;
      } catch (err) {
        const delay = retryDelayMs(target.queue, attempt);
        if (this.closed || Date.now() + delay > giveUpAt) {
          this.log.error({ queue: this.name, spans: batch.length, err: (err as Error).message }, `opentelemetry: could not send ${batch.length} spans to ${target.endpoint}, dropped`);
          return;
        }
        await new Promise((wake) => setTimeout(wake, delay));
      }
    }
  }
}

/** One POST of an OTLP body; resolves on a 2xx answer. Every step is bounded by the config's timeouts. */
function post(target: ExportTarget, body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const url = new URL(target.endpoint);
    const req = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      headers: { ...target.headers, 'content-type': 'application/x-protobuf', 'content-length': body.length },
    });
    const connectTimer = setTimeout(() => req.destroy(new Error(`connecting to ${url.host} timed out`)), target.connectTimeoutMs);
    req.on('socket', (socket) => {
      if (!socket.connecting) clearTimeout(connectTimer);
      else socket.once('connect', () => clearTimeout(connectTimer));
    });
    // Idle for longer than the send or the read timeout allows: the exchange is given up.
    req.setTimeout(Math.max(target.sendTimeoutMs, target.readTimeoutMs), () => req.destroy(new Error(`${url.host} did not answer in time`)));
    req.on('error', (err) => {
      clearTimeout(connectTimer);
      reject(err);
    });
    req.on('response', (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) res.destroy();
      });
      res.on('close', () => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve();
        else reject(new Error(`the receiver answered ${status}`));
      });
    });
    req.end(body);
  });
}
