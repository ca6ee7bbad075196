/**
 * Every error billing raises, made here and nowhere else (fastify's createError style): each class has
 * a stable `code` and `name`, and the HTTP status it maps to. The HTTP mapping turns them into
 * problem+json; the domain never writes a response itself.
 */
import type { InvalidParameter } from '../meter-model.ts';

export abstract class BillingError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  /** Problems by field (validation), or the codes of the domain rules that were broken. */
  readonly invalidParameters?: InvalidParameter[];

  constructor(message: string, invalidParameters?: InvalidParameter[]) {
    super(message);
    if (invalidParameters?.length) this.invalidParameters = invalidParameters;
  }
}

/** A request body or a definition breaks a rule (400). */
export class BillingValidationError extends BillingError {
  override readonly name = 'BillingValidationError';
  readonly status = 400;
  readonly code = 'BILLING_ERR_VALIDATION';
}

/** The resource does not exist (404). */
export class BillingNotFoundError extends BillingError {
  override readonly name = 'BillingNotFoundError';
  readonly status = 404;
  readonly code = 'BILLING_ERR_NOT_FOUND';
}

/** The resource existed and was deleted (410). */
export class BillingGoneError extends BillingError {
  override readonly name = 'BillingGoneError';
  readonly status = 410;
  readonly code = 'BILLING_ERR_GONE';
}

/** A uniqueness rule would be broken (409). */
export class BillingConflictError extends BillingError {
  override readonly name = 'BillingConflictError';
  readonly status = 409;
  readonly code = 'BILLING_ERR_CONFLICT';
}

/** The action is not allowed in the resource's state (403, as OpenMeter's state transitions). */
export class BillingForbiddenError extends BillingError {
  override readonly name = 'BillingForbiddenError';
  readonly status = 403;
  readonly code = 'BILLING_ERR_FORBIDDEN';
}

/** The resource a request depends on is deleted (412, as OpenMeter for a deleted customer). */
export class BillingPreconditionError extends BillingError {
  override readonly name = 'BillingPreconditionError';
  readonly status = 412;
  readonly code = 'BILLING_ERR_PRECONDITION';
}

/** Declared in gateway.yaml: change it there (405). */
export class BillingReadOnlyError extends BillingError {
  override readonly name = 'BillingReadOnlyError';
  readonly status = 405;
  readonly code = 'BILLING_ERR_READ_ONLY';
}

/** Concurrent writers kept winning the compare-and-set; the caller may retry (503). */
export class BillingContentionError extends BillingError {
  override readonly name = 'BillingContentionError';
  readonly status = 503;
  readonly code = 'BILLING_ERR_CONTENTION';
}

/** One field problem in the Konnect `invalid_parameters` shape. */
export function invalid(field: string, reason: string, rule = 'invalid', extra: Record<string, unknown> = {}): InvalidParameter {
  return { field, reason, rule, source: 'body', ...extra };
}

/** 400 listing every problem; the detail reads as OpenMeter's (`validation error: …`). */
export function validationFailed(problems: InvalidParameter[]): BillingValidationError {
  const described = problems.map((p) => (p.field && !p.code ? `${p.field}: ${p.reason}` : p.reason));
  return new BillingValidationError(`validation error: ${described.join('; ')}`, problems);
}

/** 400 for one broken domain rule with OpenMeter's code (e.g. `currency_not_found`). */
export function ruleBroken(code: string, message: string, field = ''): BillingValidationError {
  return new BillingValidationError(`validation error: ${message}`, [invalid(field, message, code, { code, severity: 'critical' })]);
}

export const notFound = (kind: string, idOrKey: string) => new BillingNotFoundError(`${kind} not found: ${idOrKey}`);
export const gone = (kind: string, idOrKey: string) => new BillingGoneError(`${kind} ${idOrKey} is deleted`);
export const conflict = (message: string, problems?: InvalidParameter[]) => new BillingConflictError(`conflict error: ${message}`, problems);
export const forbidden = (message: string) => new BillingForbiddenError(message);
export const precondition = (message: string) => new BillingPreconditionError(message);
export const readOnly = (kind: string, key: string) => new BillingReadOnlyError(`${kind} ${key} is declared in gateway.yaml and is read-only; change it there`);
export const contention = () => new BillingContentionError('too many concurrent changes to the same billing records; retry');
