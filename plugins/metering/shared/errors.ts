/**
 * Metering's error catalogue: every error metering raises is made here (billing's catalogue is
 * billing/shared/errors.ts). Each has a stable `name` (its class), a stable `code` (METERING_ERR_*) and
 * a kind — what went wrong in the domain's words. The domains never know HTTP: the HTTP layer alone
 * maps a kind to a status (http/http.ts), as OpenMeter's httpdriver does. docs/errors.md
 * lists every code with what to do about it.
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

/** What went wrong, as the domain sees it. */
export type MeteringErrorKind =
  /** The request or an event breaks a rule; sending it again unchanged cannot succeed. */
  | 'validation'
  /** No valid credential of the kind the operation takes itself (a portal token). */
  | 'unauthorized'
  /** The credential lacks the operation's scope. */
  | 'forbidden'
  | 'notFound'
  /** The resource exists but not with this method. */
  | 'methodNotAllowed'
  /** Declared in gateway.yaml: change it there. */
  | 'readOnly'
  /** A uniqueness or state rule would be broken. */
  | 'conflict'
  | 'tooLarge'
  /** Nothing of the request was done; the same request later may succeed. */
  | 'unavailable'
  /** An operation of OpenMeter's API that Tollgate's domain does not have (the detail says what it has instead). */
  | 'notSupported'
  | 'internal';

/** Every code of the catalogue and its kind. */
const KINDS = {
  METERING_ERR_VALIDATION: 'validation',
  METERING_ERR_MALFORMED_PATH: 'validation',
  METERING_ERR_MALFORMED_BODY: 'validation',
  METERING_ERR_CONTENT_TYPE: 'validation',
  METERING_ERR_INVALID_EVENT: 'validation',
  METERING_ERR_COLLECTOR_MAPPING_FAILED: 'validation',
  METERING_ERR_COLLECTOR_TIMEOUT: 'validation',
  METERING_ERR_COLLECTOR_TOO_LARGE: 'validation',
  METERING_ERR_COLLECTOR_INVALID_EVENT: 'validation',
  METERING_ERR_COLLECTOR_INVALID_RESULT: 'validation',
  METERING_ERR_PORTAL_TOKEN_REQUIRED: 'unauthorized',
  METERING_ERR_SCOPE_REQUIRED: 'forbidden',
  METERING_ERR_PORTAL_METER_FORBIDDEN: 'forbidden',
  METERING_ERR_NO_RESOURCE: 'notFound',
  METERING_ERR_METER_NOT_FOUND: 'notFound',
  METERING_ERR_COLLECTOR_NOT_FOUND: 'notFound',
  METERING_ERR_CUSTOMER_NOT_FOUND: 'notFound',
  METERING_ERR_NOTIFICATION_CHANNEL_NOT_FOUND: 'notFound',
  METERING_ERR_NOTIFICATION_RULE_NOT_FOUND: 'notFound',
  METERING_ERR_NOTIFICATION_EVENT_NOT_FOUND: 'notFound',
  METERING_ERR_METHOD_NOT_ALLOWED: 'methodNotAllowed',
  METERING_ERR_READ_ONLY: 'readOnly',
  METERING_ERR_METER_EXISTS: 'conflict',
  METERING_ERR_COLLECTOR_EXISTS: 'conflict',
  METERING_ERR_COLLECTOR_HAS_MATCH: 'conflict',
  METERING_ERR_NOTIFICATION_CHANNEL_IN_USE: 'conflict',
  METERING_ERR_BODY_TOO_LARGE: 'tooLarge',
  METERING_ERR_TOO_MANY_EVENTS: 'tooLarge',
  METERING_ERR_QUEUE_FULL: 'unavailable',
  METERING_ERR_AGGREGATION_LAG: 'unavailable',
  METERING_ERR_EARLIER_BATCH_FAILED: 'unavailable',
  METERING_ERR_SHUTTING_DOWN: 'unavailable',
  METERING_ERR_LEASE_LOST: 'unavailable',
  METERING_ERR_JOURNAL_NOT_READY: 'unavailable',
  METERING_ERR_COMMAND_TIMEOUT: 'unavailable',
  METERING_ERR_METER_BACKFILLING: 'unavailable',
  METERING_ERR_NOT_SUPPORTED: 'notSupported',
  METERING_ERR_INTERNAL: 'internal',
} as const satisfies Record<`METERING_ERR_${string}`, MeteringErrorKind>;

export type MeteringErrorCode = keyof typeof KINDS;

export interface ErrorDetails {
  invalidParameters?: InvalidParameter[];
  /** When the same request may succeed (kind `unavailable`). */
  retryAfterSeconds?: number;
  /** The methods the resource takes (kind `methodNotAllowed`). */
  allowedMethods?: string[];
}

/** The root of metering's errors: what the HTTP layer answers with, whatever the domain that raised it. */
export class MeteringError extends Error {
  override name = 'MeteringError';
  readonly kind: MeteringErrorKind;
  readonly invalidParameters?: InvalidParameter[];
  readonly retryAfterSeconds?: number;
  readonly allowedMethods?: string[];

  constructor(
    readonly code: MeteringErrorCode,
    message: string,
    details: ErrorDetails = {},
  ) {
    super(message);
    this.kind = KINDS[code];
    if (details.invalidParameters?.length) this.invalidParameters = details.invalidParameters;
    if (details.retryAfterSeconds !== undefined) this.retryAfterSeconds = details.retryAfterSeconds;
    if (details.allowedMethods) this.allowedMethods = details.allowedMethods;
  }
}

/** The request cannot be served as sent: its path, method, scope, size or shape. */
export class RequestError extends MeteringError {
  override name = 'RequestError';
}

/** The body cannot be taken: content type, encoding, JSON, or events that break the CloudEvents rules. */
export class BodyError extends MeteringError {
  override name = 'BodyError';
}

/** A rule of the metering service refused the request (unknown meter, duplicate key, read-only meter, …). */
export class ServiceError extends MeteringError {
  override name = 'ServiceError';
}

export const methodNotAllowed = (method: string, allowedMethods: string[]) =>
  new RequestError('METERING_ERR_METHOD_NOT_ALLOWED', `method ${method} not allowed here`, { allowedMethods });

/** No resource of `api` (metering, OpenMeter v1) answers at `path`. */
export const noResource = (api: string, path: string) => new RequestError('METERING_ERR_NO_RESOURCE', `no ${api} resource at ${path}`);

/** An OpenMeter operation without a counterpart here; `instead`: what to do in Tollgate. */
export const notSupported = (operation: string, instead: string) =>
  new RequestError('METERING_ERR_NOT_SUPPORTED', `${operation} is not supported: ${instead}`);

export const portalTokenRequired = () =>
  new RequestError('METERING_ERR_PORTAL_TOKEN_REQUIRED', 'a valid, unexpired portal token is required (Authorization: Bearer <token>)');

export const portalMeterForbidden = (slug: string) => new RequestError('METERING_ERR_PORTAL_METER_FORBIDDEN', `the portal token does not allow meter ${slug}`);

export const scopeRequired = (scope: string) => new RequestError('METERING_ERR_SCOPE_REQUIRED', `this operation requires the scope '${scope}'`);

export const bodyTooLarge = (limit: number) => new RequestError('METERING_ERR_BODY_TOO_LARGE', `request body is larger than ${limit} bytes`);

/** A 400 whose detail reads as OpenMeter's (`validation error: …`), from the problems already described. */
export const validationFailed = (described: string[], problems: InvalidParameter[]) =>
  new RequestError('METERING_ERR_VALIDATION', `validation error: ${described.join('; ')}`, { invalidParameters: problems });

/** A 400 listing `problems`, each described by its field and reason. */
export const invalidParameters = (problems: InvalidParameter[]) => validationFailed(problems.map((p) => (p.field ? `${p.field}: ${p.reason}` : p.reason)), problems);

/** A body that is not UTF-8; `prefix` says what was being read (`invalid event: ` on ingest). */
export const notUtf8 = (prefix = '') =>
  new BodyError('METERING_ERR_MALFORMED_BODY', `${prefix}the body is not valid UTF-8`, { invalidParameters: [{ field: 'body', reason: 'not valid UTF-8', rule: 'encoding', source: 'body' }] });

/** A body that is not JSON: the detail names the parser's complaint, `reason` is the invalid parameter's. */
export const malformedJson = (cause: Error, reason: string, prefix = '') =>
  new BodyError('METERING_ERR_MALFORMED_BODY', `${prefix}malformed JSON: ${cause.message}`, { invalidParameters: [{ field: 'body', reason, rule: 'type', source: 'body' }] });

/** Some events of a request break the rules; `problems` lists them all, the first one in the detail. */
export function invalidEvents(problems: InvalidParameter[], total: number): BodyError {
  const count = new Set(problems.map((p) => p.index)).size;
  return new BodyError('METERING_ERR_INVALID_EVENT', `invalid event: ${count} of ${total} events are invalid: ${problems[0].field}: ${problems[0].reason}`, { invalidParameters: problems });
}

export const tooManyEvents = (max: number, count: number) =>
  new BodyError('METERING_ERR_TOO_MANY_EVENTS', `a request may carry at most ${max} events (got ${count})`);

export const meterNotFound = (idOrKey: string) => new ServiceError('METERING_ERR_METER_NOT_FOUND', `not found error: meter not found: ${idOrKey}`);

export const collectorNotFound = (name: string) => new ServiceError('METERING_ERR_COLLECTOR_NOT_FOUND', `not found error: collector not found: ${name}`);

/** A meter or collector of gateway.yaml, which the API does not change. */
export const declaredReadOnly = (what: 'meter' | 'collector', key: string) =>
  new ServiceError('METERING_ERR_READ_ONLY', `${what} ${key} is declared in gateway.yaml and is read-only; change it there`);

export const meterExists = () => new ServiceError('METERING_ERR_METER_EXISTS', 'conflict error: meter with the same slug already exists');

export const collectorExists = (name: string) => new ServiceError('METERING_ERR_COLLECTOR_EXISTS', `conflict error: a collector named ${name} already exists`);

/** A collector with `match` rewrites events posted to /events: it has no webhook of its own. */
export const collectorHasMatch = (name: string) =>
  new ServiceError('METERING_ERR_COLLECTOR_HAS_MATCH', `collector ${name} rewrites events posted to /events (it has a match); it takes no webhook`);

export const meterBackfilling = (key: string, percent: number) =>
  new ServiceError('METERING_ERR_METER_BACKFILLING', `meter ${key} is still aggregating stored events (${percent}%); retry later`, { retryAfterSeconds: 5 });

/** Why a collector refused a request (the invalid parameter's `rule`); always the whole request. */
export type CollectorFailure = 'COLLECTOR_MAPPING_FAILED' | 'COLLECTOR_TIMEOUT' | 'COLLECTOR_TOO_LARGE' | 'COLLECTOR_INVALID_EVENT' | 'COLLECTOR_INVALID_RESULT';

export class CollectorError extends MeteringError {
  override name = 'CollectorError';
  constructor(
    readonly failure: CollectorFailure,
    readonly collector: string,
    message: string,
  ) {
    const full = `collector ${collector}: ${message}`;
    super(`METERING_ERR_${failure}`, full, { invalidParameters: [{ field: 'collector', reason: full, rule: failure, collector }] });
  }
}

/**
 * A refusal the producer or reader retries (nothing of the request was done), with a stable code and
 * name: a class each, so that callers can tell them apart.
 */
function unavailable(name: string, code: MeteringErrorCode, message: string, retryAfterSeconds = 1) {
  return class extends MeteringError {
    override name = name;
    constructor() {
      super(code, message, { retryAfterSeconds });
    }
  };
}

/** The codes of the refusals another plugin's producer meets and retries (public.ts exports them to compare `error.code`). */
export const QUEUE_FULL_CODE = 'METERING_ERR_QUEUE_FULL' satisfies MeteringErrorCode;
export const AGGREGATION_LAG_CODE = 'METERING_ERR_AGGREGATION_LAG' satisfies MeteringErrorCode;

export const QueueFullError = unavailable('QueueFullError', QUEUE_FULL_CODE, 'the ingest queue is full, retry later');
/** A batch was not written because one before it failed (it was prepared on top of it). */
export const EarlierBatchFailedError = unavailable('EarlierBatchFailedError', 'METERING_ERR_EARLIER_BATCH_FAILED', 'an earlier batch failed to commit; retry later');
export const WriterClosedError = unavailable('WriterClosedError', 'METERING_ERR_SHUTTING_DOWN', 'the gateway is shutting down', 5);
export const LeaseLostError = unavailable('LeaseLostError', 'METERING_ERR_LEASE_LOST', 'this process is no longer the metering aggregator');
export const AggregationLagError = unavailable('AggregationLagError', AGGREGATION_LAG_CODE, 'events acknowledged earlier are still being aggregated; retry later');
export const JournalNotReadyError = unavailable('JournalNotReadyError', 'METERING_ERR_JOURNAL_NOT_READY', 'events stored by an earlier version are being moved into the journal; retry later');
/** A meter change handed to the aggregator (meter/meter-commands.ts) got no answer in time. */
export const MeterCommandTimeout = unavailable(
  'MeterCommandTimeout',
  'METERING_ERR_COMMAND_TIMEOUT',
  'no metering aggregator answered in time; the meter change may or may not have been made, retry later',
  5,
);

/** A query names a customer that does not exist (OpenMeter: 404 with the code `customer_not_found`). */
export class CustomerNotFoundError extends MeteringError {
  override name = 'CustomerNotFoundError';
  constructor(
    readonly customers: string[],
    field: string,
  ) {
    const message = `customer not found: ${customers.join(', ')}`;
    super('METERING_ERR_CUSTOMER_NOT_FOUND', message, { invalidParameters: [{ field, reason: message, rule: 'customer_not_found', source: 'body' }] });
  }
}

/** A failure of no known kind: the client sees no more than this. */
export const internalError = () => new MeteringError('METERING_ERR_INTERNAL', 'internal error');

/** A notification channel, rule or event that does not exist (or, for channels and rules, was deleted). */
export const notificationNotFound = (what: 'channel' | 'rule' | 'event', id: string) =>
  new ServiceError(`METERING_ERR_NOTIFICATION_${what.toUpperCase() as 'CHANNEL' | 'RULE' | 'EVENT'}_NOT_FOUND`, `not found error: notification ${what} not found: ${id}`);

export const channelInUse = (id: string, rules: string[]) =>
  new ServiceError('METERING_ERR_NOTIFICATION_CHANNEL_IN_USE', `conflict error: notification channel ${id} is used by rules ${rules.join(', ')}`);
