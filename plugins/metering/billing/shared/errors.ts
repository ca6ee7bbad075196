/**
 * Every error billing raises, made here and nowhere else (fastify's createError style): each kind has
 * a stable `code` and `name`, and the HTTP status it maps to. The HTTP mapping turns them into
 * problem+json; the domain never writes a response itself.
 */
import type { InvalidParameter } from '../../shared/errors.ts';

export class BillingError extends Error {
  /** Problems by field (validation), or the codes of the domain rules that were broken. */
  readonly invalidParameters?: InvalidParameter[];

  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    name: string,
    invalidParameters?: InvalidParameter[],
  ) {
    super(message);
    this.name = name;
    if (invalidParameters?.length) this.invalidParameters = invalidParameters;
  }
}

/** The kinds of billing error: name, stable code, and HTTP status. */
const KINDS = {
  /** A request body or a definition breaks a rule. */
  validation: ['BillingValidationError', 'BILLING_ERR_VALIDATION', 400],
  /** The resource does not exist. */
  notFound: ['BillingNotFoundError', 'BILLING_ERR_NOT_FOUND', 404],
  /** The resource existed and was deleted. */
  gone: ['BillingGoneError', 'BILLING_ERR_GONE', 410],
  /** A uniqueness rule would be broken. */
  conflict: ['BillingConflictError', 'BILLING_ERR_CONFLICT', 409],
  /** The action is not allowed in the resource's state (403, as OpenMeter's state transitions). */
  forbidden: ['BillingForbiddenError', 'BILLING_ERR_FORBIDDEN', 403],
  /** The resource a request depends on is deleted (412, as OpenMeter for a deleted customer). */
  precondition: ['BillingPreconditionError', 'BILLING_ERR_PRECONDITION', 412],
  /** Declared in gateway.yaml: change it there. */
  readOnly: ['BillingReadOnlyError', 'BILLING_ERR_READ_ONLY', 405],
  /** Concurrent writers kept winning the compare-and-set; the caller may retry. */
  contention: ['BillingContentionError', 'BILLING_ERR_CONTENTION', 503],
} as const satisfies Record<string, readonly [string, string, number]>;

function billingError(kind: keyof typeof KINDS, message: string, invalidParameters?: InvalidParameter[]): BillingError {
  const [name, code, status] = KINDS[kind];
  return new BillingError(message, status, code, name, invalidParameters);
}

/** One field problem in the Konnect `invalid_parameters` shape. */
export function invalid(field: string, reason: string, rule = 'invalid', extra: Record<string, unknown> = {}): InvalidParameter {
  return { field, reason, rule, source: 'body', ...extra };
}

/** 400 listing every problem; the detail reads as OpenMeter's (`validation error: …`). */
export function validationFailed(problems: InvalidParameter[]): BillingError {
  const described = problems.map((p) => (p.field && !p.code ? `${p.field}: ${p.reason}` : p.reason));
  return billingError('validation', `validation error: ${described.join('; ')}`, problems);
}

/** 400 for one broken domain rule with OpenMeter's code (e.g. `currency_not_found`). */
export function ruleBroken(code: string, message: string, field = ''): BillingError {
  return billingError('validation', `validation error: ${message}`, [invalid(field, message, code, { code, severity: 'critical' })]);
}

export const notFound = (kind: string, idOrKey: string) => billingError('notFound', `${kind} not found: ${idOrKey}`);
export const gone = (kind: string, idOrKey: string) => billingError('gone', `${kind} ${idOrKey} is deleted`);
export const conflict = (message: string, problems?: InvalidParameter[]) => billingError('conflict', `conflict error: ${message}`, problems);
export const forbidden = (message: string) => billingError('forbidden', message);
export const precondition = (message: string) => billingError('precondition', message);
export const readOnly = (kind: string, key: string) => billingError('readOnly', `${kind} ${key} is declared in gateway.yaml and is read-only; change it there`);
export const contention = () => billingError('contention', 'too many concurrent changes to the same billing records; retry');
