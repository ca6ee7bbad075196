/** Errors a plugin throws or catches: HTTP answers, Kong's admin errors, request limits, the store's failures. */
export { HttpError } from '../pipeline/http-error.ts';
/** What a plugin's `prepare` throws for a config it cannot use; what compileOperatorRegex throws. */
export { ConfigCompileError, RegexRefusedError } from '../errors.ts';
export { ForeignKeyViolationError, NotFoundError, SchemaViolationError, UniqueViolationError } from '../toolkit/admin-errors.ts';
export { RequestLimitError } from '../toolkit/limits.ts';
export { StoreClosedError, StoreUnavailableError, StoreUnwritableError } from '../store/errors.ts';
