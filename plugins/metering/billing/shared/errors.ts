/**
 * Billing's error catalogue: every error billing raises is made here and nowhere else (fastify's
 * createError style). Each kind has a stable `name` and `code` (BILLING_ERR_*); the domain never knows
 * HTTP: billing/http maps a kind to a status, and the answer carries the code.
 */
import type { InvalidParameter } from '../../shared/errors.ts';

/** The kinds of billing error: name and stable code. */
const KINDS = {
  /** A request body or a definition breaks a rule. */
  validation: ['BillingValidationError', 'BILLING_ERR_VALIDATION'],
  /** The resource does not exist. */
  notFound: ['BillingNotFoundError', 'BILLING_ERR_NOT_FOUND'],
  /** The resource existed and was deleted. */
  gone: ['BillingGoneError', 'BILLING_ERR_GONE'],
  /** A uniqueness rule would be broken. */
  conflict: ['BillingConflictError', 'BILLING_ERR_CONFLICT'],
  /** The action is not allowed in the resource's state (as OpenMeter's state transitions). */
  forbidden: ['BillingForbiddenError', 'BILLING_ERR_FORBIDDEN'],
  /** The resource a request depends on is deleted (as OpenMeter for a deleted customer). */
  precondition: ['BillingPreconditionError', 'BILLING_ERR_PRECONDITION'],
  /** Declared in gateway.yaml: change it there. */
  readOnly: ['BillingReadOnlyError', 'BILLING_ERR_READ_ONLY'],
  /** Concurrent writers kept winning the compare-and-set; the caller may retry. */
  contention: ['BillingContentionError', 'BILLING_ERR_CONTENTION'],
} as const satisfies Record<string, readonly [string, `BILLING_ERR_${string}`]>;

export type BillingErrorKind = keyof typeof KINDS;

export class BillingError extends Error {
  readonly code: (typeof KINDS)[BillingErrorKind][1];
  /** Problems by field (validation), or the codes of the domain rules that were broken. */
  readonly invalidParameters?: InvalidParameter[];

  constructor(
    readonly kind: BillingErrorKind,
    message: string,
    invalidParameters?: InvalidParameter[],
  ) {
    super(message);
    [this.name, this.code] = KINDS[kind];
    if (invalidParameters?.length) this.invalidParameters = invalidParameters;
  }
}

/** One field problem in the Konnect `invalid_parameters` shape. */
export function invalid(field: string, reason: string, rule = 'invalid', extra: Record<string, unknown> = {}): InvalidParameter {
  return { field, reason, rule, source: 'body', ...extra };
}

/** A validation error listing every problem; the detail reads as OpenMeter's (`validation error: …`). */
export function validationFailed(problems: InvalidParameter[]): BillingError {
  const described = problems.map((p) => (p.field && !p.code ? `${p.field}: ${p.reason}` : p.reason));
  return new BillingError('validation', `validation error: ${described.join('; ')}`, problems);
}

/** A validation error for one broken domain rule with OpenMeter's code (e.g. `currency_not_found`). */
export function ruleBroken(code: string, message: string, field = ''): BillingError {
  return new BillingError('validation', `validation error: ${message}`, [invalid(field, message, code, { code, severity: 'critical' })]);
}

export const notFound = (kind: string, idOrKey: string) => new BillingError('notFound', `${kind} not found: ${idOrKey}`);
export const gone = (kind: string, idOrKey: string) => new BillingError('gone', `${kind} ${idOrKey} is deleted`);
export const conflict = (message: string, problems?: InvalidParameter[]) => new BillingError('conflict', `conflict error: ${message}`, problems);
export const forbidden = (message: string) => new BillingError('forbidden', message);
export const precondition = (message: string) => new BillingError('precondition', message);
export const readOnly = (kind: string, key: string) => new BillingError('readOnly', `${kind} ${key} is declared in gateway.yaml and is read-only; change it there`);
export const contention = () => new BillingError('contention', 'too many concurrent changes to the same billing records; retry');

/** A body nested deeper than billing reads (a SyntaxError: the body is answered as malformed JSON). */
export class JsonTooDeepError extends SyntaxError {
  readonly code = 'BILLING_ERR_JSON_TOO_DEEP';

  constructor(maxDepth: number) {
    super(`JSON nested deeper than ${maxDepth} levels`);
    this.name = 'JsonTooDeepError';
  }
}

/** The lease ran out during a change that took longer than it lasts: the process that took it over applies. */
export class DeclaredLeaseLostError extends Error {
  readonly code = 'BILLING_ERR_DECLARED_LEASE_LOST';

  constructor() {
    super('the lease on applying gateway.yaml\'s billing entities expired; another process applies them');
    this.name = 'DeclaredLeaseLostError';
  }
}
