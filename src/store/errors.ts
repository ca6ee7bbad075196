/** The store's errors, each with a stable `code` and `name` (as undici's and fastify's errors carry). */

export class StoreError extends Error {
  readonly code: string = 'TOLLGATE_ERR_STORE';
  override readonly name: string = 'StoreError';
}

/** The database cannot be reached (connection refused, authentication failed, timed out). */
export class StoreUnavailableError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_UNAVAILABLE';
  override readonly name = 'StoreUnavailableError';
}

/** The database's schema or settings do not fit this gateway (newer schema, wrong encoding). */
export class StoreSchemaError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_SCHEMA';
  override readonly name = 'StoreSchemaError';
}

/** The store was closed, or the process that owns it went away. */
export class StoreClosedError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_CLOSED';
  override readonly name = 'StoreClosedError';
}
