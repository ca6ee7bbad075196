import { StoreClosedError, StoreUnavailableError } from '../store/errors.ts';

/** The error a plugin or the core throws to end a request with a status; the pipeline answers with it. */
export class HttpError extends Error {
  override readonly name: string = 'HttpError';
  /** Stable across releases: a string here, Kong's numeric database error code in the admin API's errors. */
  readonly code: string | number = 'TOLLGATE_ERR_HTTP';

  constructor(
    readonly status: number,
    message: string,
    readonly headers?: Record<string, string>,
    /** Answered without a body (Kong's `kong.response.exit(status)`); the message is for logs only. */
    readonly bodyless = false,
  ) {
    super(message);
  }

  /** The JSON body the admin API answers with (Kong's `{"message": ...}`). */
  body(): object {
    return { message: this.message };
  }
}

/** Seconds a client is told to wait before it tries again while the store cannot be reached. */
const STORE_RETRY_AFTER_S = '1';

/**
 * The answer an error stands for: an HttpError's own, 503 with Retry-After when the store cannot be
 * reached (a database restarting, the primary gone: retrying later is right, and a client must not take
 * it for a fault of its request or of the gateway), undefined for anything else (a 500).
 */
export function answerFor(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  if (err instanceof StoreUnavailableError || err instanceof StoreClosedError) {
    return new HttpError(503, 'the store is unavailable; retry later', { 'retry-after': STORE_RETRY_AFTER_S });
  }
  return undefined;
}
