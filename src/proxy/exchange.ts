/**
 * What the gRPC and WebSocket proxies report to their caller, the pipeline, which keeps the request's
 * record (status, latencies, byte counts), runs the plugins' response phase and answers the client
 * with the gateway's own errors. The proxies themselves know only the exchange they relay.
 */
import type { OutgoingHttpHeaders } from 'node:http';

export interface ExchangeHandlers {
  /** The upstream answered, `ms` after the request went out. */
  onUpstreamLatency(ms: number): void;
  /**
   * The upstream's response head, cleaned for the client, goes downstream next: the caller adds its
   * own headers to `headers` (the plugins' response phase, Kong's latency headers). `sentAt`: when the
   * request went upstream.
   */
  onResponseHead(status: number, headers: OutgoingHttpHeaders, sentAt: number): void;
  /** That head went downstream. */
  onResponseSent(status: number): void;
  /**
   * Nothing of the upstream's answer went downstream: the client gets the gateway's own error answer.
   * `failure`: the upstream's error, when there was one (traced at debug with its code).
   */
  onError(status: number, message: string, failure?: Error): void;
  /** One of the proxy's callbacks threw: the request gets its 500, or its connection is cut. */
  fail(err: unknown): void;
}

/** A proxy's event callback whose exception fails its exchange (500, or a cut connection) instead of reaching the process. */
export function contained<A extends unknown[]>(handlers: Pick<ExchangeHandlers, 'fail'>, callback: (...args: A) => void): (...args: A) => void {
  return (...args) => {
    try {
      callback(...args);
    } catch (err) {
      handlers.fail(err);
    }
  };
}
