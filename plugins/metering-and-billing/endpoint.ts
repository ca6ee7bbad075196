/**
 * The remote ingest endpoint as the queue sees it: one POST per batch (`application/cloudevents-batch+json`,
 * the `api_token` as bearer token), and what its answer means for the batch. Three kinds of failure,
 * because each asks for a different remedy:
 * - the events themselves are refused (a 4xx about the content: 400, 413, 415, 422, …): sending the same
 *   batch again cannot help, so the queue splits it until the refused events stand alone;
 * - the request is refused for where or how it is sent (401, 403, 404, 405, …: a wrong token or URL): no
 *   event is at fault, and splitting would condemn them all, so the batch is retried;
 * - no answer, or one that says "later" (5xx, 408, 429, a timeout, a connection error): retried.
 */
import { Pool } from 'undici';
import { parseUntrustedJson } from '../../src/pdk/index.ts';
import type { RequestMeteringConfig } from './schema.ts';

/** How much of a refusal's reason is kept (the dead letters show it; a receiver may answer with a page of HTML). */
export const MAX_REASON_LENGTH = 500;

/** 4xx answers about the endpoint or the credentials, not about the events sent. */
const ENDPOINT_STATUSES = new Set([401, 403, 404, 405, 407, 410, 421, 426]);
/** 4xx answers that mean "try again later" (RFC 9110 §15.5.9, RFC 6585 §4). */
const LATER_STATUSES = new Set([408, 429]);

/** Why a batch was not delivered; `status` is the endpoint's HTTP status, null when it did not answer. */
export abstract class DeliveryError extends Error {
  abstract readonly code: string;

  constructor(
    message: string,
    readonly status: number | null,
    /** What the endpoint said (its problem's detail or message, else its body), bounded. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The endpoint refused the events themselves: resending the same batch cannot succeed. */
export class EventsRefusedError extends DeliveryError {
  override readonly name = 'EventsRefusedError';
  readonly code = 'TOLLGATE_ERR_INGEST_EVENTS_REFUSED';

  constructor(
    status: number,
    reason: string,
    /** Positions in the batch the answer names as refused (problem+json `invalid_parameters`): a hint, never trusted alone. */
    readonly named: number[],
  ) {
    super(`the ingest endpoint refused the events (${status}): ${reason}`, status, reason);
  }
}

/** The endpoint refused the request for its URL or credentials: no event is at fault. */
export class EndpointRefusedError extends DeliveryError {
  override readonly name = 'EndpointRefusedError';
  readonly code = 'TOLLGATE_ERR_INGEST_ENDPOINT_REFUSED';

  constructor(status: number, reason: string) {
    super(`the ingest endpoint refused the request (${status}): check ingest_endpoint and api_token: ${reason}`, status, reason);
  }
}

/** No answer, or an answer asking to try later. */
export class EndpointUnavailableError extends DeliveryError {
  override readonly name = 'EndpointUnavailableError';
  readonly code = 'TOLLGATE_ERR_INGEST_UNAVAILABLE';

  static answered(status: number, reason: string): EndpointUnavailableError {
    return new EndpointUnavailableError(`the ingest endpoint answered ${status}: ${reason}`, status, reason);
  }

  static unreachable(err: Error): EndpointUnavailableError {
    const reason = bounded(err.message || err.name);
    return new EndpointUnavailableError(`the ingest endpoint could not be reached: ${reason}`, null, reason, { cause: err });
  }
}

export class IngestEndpoint {
  private pool: Pool | undefined;
  private poolKey = '';
  private config!: RequestMeteringConfig;

  constructor(config: RequestMeteringConfig) {
    this.configure(config);
  }

  /** New settings; a new connection pool only when the connection settings changed. */
  configure(config: RequestMeteringConfig): void {
    this.config = config;
    const key = `${config.ingest_endpoint}|${config.ssl_verify}|${config.keepalive}|${config.timeout}`;
    if (key === this.poolKey) return;
    const previous = this.pool;
    this.poolKey = key;
    const url = new URL(config.ingest_endpoint!);
    const idle = Math.max(1, config.keepalive);
    this.pool = new Pool(url.origin, {
      keepAliveTimeout: idle,
      keepAliveMaxTimeout: idle,
      headersTimeout: config.timeout,
      bodyTimeout: config.timeout,
      connect: { rejectUnauthorized: config.ssl_verify, timeout: config.timeout },
    });
    // Connection errors reach each request; the pool's own event needs a listener.
    this.pool.on('connectionError', () => {});
    void previous?.close().catch(() => {});
  }

  /** One POST of the batch (one event JSON per line); undefined when the endpoint acknowledged it (2xx), else why not. */
  async post(events: string, count: number, stop: AbortSignal): Promise<DeliveryError | undefined> {
    const url = new URL(this.config.ingest_endpoint!);
    let status: number;
    let text: string;
    let type: string;
    try {
      const response = await this.pool!.request({
        method: 'POST',
        path: url.pathname + url.search,
        headers: {
          'content-type': 'application/cloudevents-batch+json',
          authorization: `Bearer ${this.config.api_token}`,
        },
        body: `[${events.replaceAll('\n', ',')}]`,
        signal: AbortSignal.any([stop, AbortSignal.timeout(this.config.timeout)]),
      });
      status = response.statusCode;
      type = String(response.headers['content-type'] ?? '');
      text = await response.body.text();
    } catch (err) {
      return EndpointUnavailableError.unreachable(err as Error);
    }
    if (status >= 200 && status < 300) return undefined;
    return failureOf(status, type, text, count);
  }

  close(): Promise<void> {
    return this.pool?.close().catch(() => {}) ?? Promise.resolve();
  }
}

/** What a non-2xx answer means for the batch (see the file's comment). */
export function failureOf(status: number, contentType: string, text: string, count: number): DeliveryError {
  const problem = /json/i.test(contentType) ? parseJson(text) : undefined;
  const reason = bounded(problemText(problem) ?? text.trim());
  if (status >= 400 && status < 500 && !LATER_STATUSES.has(status)) {
    return ENDPOINT_STATUSES.has(status) ? new EndpointRefusedError(status, reason) : new EventsRefusedError(status, reason, namedPositions(problem, count));
  }
  return EndpointUnavailableError.answered(status, reason);
}

function parseJson(text: string): unknown {
  try {
    return parseUntrustedJson(text);
  } catch {
    return undefined;
  }
}

/** The human part of an error body: problem+json's `detail` (OpenMeter, Konnect, Tollgate), Kong's `message`, or `title`. */
function problemText(problem: unknown): string | undefined {
  if (typeof problem !== 'object' || problem === null) return undefined;
  const { detail, message, title } = problem as Record<string, unknown>;
  return [detail, message, title].find((v): v is string => typeof v === 'string' && v !== '');
}

/**
 * The batch positions a problem+json answer names: `invalid_parameters[].index` (Tollgate) or a field
 * starting `[n]` (Konnect's shape for an array body). Empty when the answer names none within the batch.
 */
function namedPositions(problem: unknown, count: number): number[] {
  const parameters = (problem as { invalid_parameters?: unknown } | undefined)?.invalid_parameters;
  if (!Array.isArray(parameters)) return [];
  const named = new Set<number>();
  for (const parameter of parameters) {
    const { index, field } = (parameter ?? {}) as { index?: unknown; field?: unknown };
    const position = typeof index === 'number' ? index : Number(/^\[(\d+)\]/.exec(typeof field === 'string' ? field : '')?.[1]);
    if (Number.isInteger(position) && position >= 0 && position < count) named.add(position);
  }
  return [...named].sort((a, b) => a - b);
}

function bounded(text: string): string {
  return text.length <= MAX_REASON_LENGTH ? text : `${text.slice(0, MAX_REASON_LENGTH - 1)}…`;
}
