/**
 * Every error metering raises, made here (billing's errors.ts does the same for its domain): each has a
 * stable `code` and `name`, the HTTP status it maps to, and what the client can act on (the invalid
 * parameters, a Retry-After). http.ts turns any of them into problem+json; the domains never write a
 * response themselves.
 */
/** One problem of a request body, in the Konnect `invalid_parameters` shape. */
export interface InvalidParameter {
  field: string;
  reason: string;
  rule?: string;
  source?: 'body' | 'query' | 'path' | 'header';
  choices?: readonly string[];
  [extra: string]: unknown;
}

export interface ErrorDetails {
  invalidParameters?: InvalidParameter[];
  headers?: Record<string, string>;
  /** A code of its own; by default the status's. */
  code?: string;
}

const CODES_BY_STATUS: Record<number, string> = {
  400: 'METERING_ERR_VALIDATION',
  401: 'METERING_ERR_UNAUTHORIZED',
  403: 'METERING_ERR_FORBIDDEN',
  404: 'METERING_ERR_NOT_FOUND',
  405: 'METERING_ERR_METHOD_NOT_ALLOWED',
  409: 'METERING_ERR_CONFLICT',
  413: 'METERING_ERR_TOO_LARGE',
  415: 'METERING_ERR_UNSUPPORTED_MEDIA_TYPE',
  500: 'METERING_ERR_INTERNAL',
  503: 'METERING_ERR_UNAVAILABLE',
};

/** A request ends with this status and message (an HTTP-level refusal, or a failure of any kind below). */
export class MeteringError extends Error {
  override name = 'MeteringError';
  readonly code: string;
  readonly invalidParameters?: InvalidParameter[];
  readonly headers: Record<string, string>;

  constructor(
    readonly status: number,
    message: string,
    details: ErrorDetails = {},
  ) {
    super(message);
    this.code = details.code ?? CODES_BY_STATUS[status] ?? `METERING_ERR_HTTP_${status}`;
    if (details.invalidParameters) this.invalidParameters = details.invalidParameters;
    this.headers = details.headers ?? {};
  }
}

/** A rule of the metering service refused the request (unknown meter, duplicate key, read-only meter, …). */
export class ServiceError extends MeteringError {
  override name = 'ServiceError';
  constructor(status: number, message: string, headers?: Record<string, string>) {
    super(status, message, { headers });
  }
}

/** The body cannot be taken: content type, encoding, JSON, or events that break the CloudEvents rules. */
export class BodyError extends MeteringError {
  override name = 'BodyError';
  constructor(status: number, message: string, invalidParameters: InvalidParameter[] = []) {
    super(status, message, { invalidParameters: invalidParameters.length ? invalidParameters : undefined });
  }
}

/** Why a collector refused a request; always the whole request. */
export type CollectorErrorCode = 'COLLECTOR_MAPPING_FAILED' | 'COLLECTOR_TIMEOUT' | 'COLLECTOR_TOO_LARGE' | 'COLLECTOR_INVALID_EVENT' | 'COLLECTOR_INVALID_RESULT';

export class CollectorError extends MeteringError {
  override name = 'CollectorError';
  declare readonly code: CollectorErrorCode;
  constructor(
    code: CollectorErrorCode,
    readonly collector: string,
    message: string,
  ) {
    const full = `collector ${collector}: ${message}`;
    super(400, full, { code, invalidParameters: [{ field: 'collector', reason: full, rule: code, collector }] });
  }
}

/**
 * A 503 of its own kind (the producer or reader retries; nothing of the request was stored), with a
 * stable code and name: a class each, so that callers can tell them apart.
 */
function unavailable(name: string, code: string, message: string, retryAfterSeconds = 1) {
  return class extends MeteringError {
    override name = name;
    constructor() {
      super(503, message, { code, headers: { 'retry-after': String(retryAfterSeconds) } });
    }
  };
}

/** The codes of the refusals another plugin's producer meets and retries (public.ts exports them to compare `error.code`). */
export const QUEUE_FULL_CODE = 'METERING_QUEUE_FULL';
export const AGGREGATION_LAG_CODE = 'METERING_AGGREGATION_LAG';

export const QueueFullError = unavailable('QueueFullError', QUEUE_FULL_CODE, 'the ingest queue is full, retry later');
/** A batch was not written because one before it failed (it was prepared on top of it). */
export const EarlierBatchFailedError = unavailable('EarlierBatchFailedError', 'METERING_EARLIER_BATCH_FAILED', 'an earlier batch failed to commit; retry later');
export const WriterClosedError = unavailable('WriterClosedError', 'METERING_SHUTTING_DOWN', 'the gateway is shutting down', 5);
export const LeaseLostError = unavailable('LeaseLostError', 'METERING_LEASE_LOST', 'this process is no longer the metering aggregator');
export const AggregationLagError = unavailable('AggregationLagError', AGGREGATION_LAG_CODE, 'events acknowledged earlier are still being aggregated; retry later');
export const JournalNotReadyError = unavailable('JournalNotReadyError', 'METERING_JOURNAL_NOT_READY', 'events stored by an earlier version are being moved into the journal; retry later');

/** A query names a customer that does not exist (OpenMeter: 404 with the code `customer_not_found`). */
export class CustomerNotFoundError extends MeteringError {
  override name = 'CustomerNotFoundError';
  constructor(
    readonly customers: string[],
    field: string,
  ) {
    const message = `customer not found: ${customers.join(', ')}`;
    super(404, message, { code: 'METERING_ERR_CUSTOMER_NOT_FOUND', invalidParameters: [{ field, reason: message, rule: 'customer_not_found', source: 'body' }] });
  }
}
