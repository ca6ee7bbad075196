/** The store's errors, each with a stable `code` and `name` (as undici's and fastify's errors carry). */

export class StoreError extends Error {
  readonly code: string = 'TOLLGATE_ERR_STORE';
  override readonly name: string = 'StoreError';
}

/** The database cannot be reached (connection refused, authentication failed, timed out). */
export class StoreUnavailableError extends StoreError {
  override readonly code: string = 'TOLLGATE_ERR_STORE_UNAVAILABLE';
  override readonly name: string = 'StoreUnavailableError';
}

/**
 * The embedded store refuses every write since one failed (a full or failing disk), until it is opened
 * again: reads still work. A kind of unavailability, so callers that answer 503 for one do for this too.
 */
export class StoreUnwritableError extends StoreUnavailableError {
  override readonly code = 'TOLLGATE_ERR_STORE_UNWRITABLE';
  override readonly name = 'StoreUnwritableError';
}

/** The database's schema or settings do not fit this gateway (newer schema, wrong encoding). */
export class StoreSchemaError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_SCHEMA';
  override readonly name = 'StoreSchemaError';
}

/** The embedded store's files are damaged or cannot be read: the operator repairs or restores them. */
export class StoreDamagedError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_DAMAGED';
  override readonly name = 'StoreDamagedError';
}

/** The store was closed, or the process that owns it went away. */
export class StoreClosedError extends StoreError {
  override readonly code = 'TOLLGATE_ERR_STORE_CLOSED';
  override readonly name = 'StoreClosedError';
}

const BY_CODE: Record<string, new (message: string, options?: ErrorOptions) => StoreError> = {
  TOLLGATE_ERR_STORE_UNAVAILABLE: StoreUnavailableError,
  TOLLGATE_ERR_STORE_UNWRITABLE: StoreUnwritableError,
  TOLLGATE_ERR_STORE_SCHEMA: StoreSchemaError,
  TOLLGATE_ERR_STORE_DAMAGED: StoreDamagedError,
  TOLLGATE_ERR_STORE_CLOSED: StoreClosedError,
};

/** The error a store's owner sent over its socket (store/ipc.ts), as the class its code names. */
export function storeErrorFromWire(error: { name: string; message: string; code?: string }): StoreError {
  const Class = (error.code !== undefined && BY_CODE[error.code]) || StoreError;
  return new Class(error.message, { cause: error });
}
