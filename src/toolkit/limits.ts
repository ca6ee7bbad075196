/**
 * Refusals of requests that ask for more work than the gateway does for anyone, each with a stable `code`
 * and `name` (as fastify's `FST_ERR_*` and undici's `UND_ERR_*`). Plugins answer them in their own
 * protocol's shape (oauth2 as OAuth errors); an authentication plugin reading a credential from a body
 * treats a body beyond the limits as one without a credential.
 */

import { HttpError } from '../pipeline/http-error.ts';

/** Kong reads at most 100 arguments of a query and of a body (OpenResty's get_uri_args/get_post_args). */
export const MAX_PARAMETERS = 100;

/**
 * The largest body parameters are read from. Kong reads them only from a body nginx holds in memory
 * (`client_body_buffer_size`, 8 KiB by default) and sees no parameters in a larger one; 16 KiB (what
 * Node allows for all the request's headers) leaves room for long `state` and `redirect_uri` values.
 */
export const MAX_PARAMETER_BODY = 16 * 1024;

export type LimitCode =
  | 'TOLLGATE_ERR_BODY_TOO_LARGE'
  | 'TOLLGATE_ERR_TOO_MANY_PARAMETERS'
  | 'TOLLGATE_ERR_HASHING_BUSY'
  | 'TOLLGATE_ERR_ADDRESS_LOCKED'
  | 'TOLLGATE_ERR_ADDRESS_BUSY'
  | 'TOLLGATE_ERR_CREDENTIAL_LOCKED';

/** An HttpError: wherever it is not answered in a protocol's own shape, the pipeline answers its status. */
export class RequestLimitError extends HttpError {
  override readonly name = 'RequestLimitError';

  private constructor(
    override readonly code: LimitCode,
    override readonly status: 400 | 413 | 429 | 503,
    message: string,
    /** Seconds after which trying again may succeed (the Retry-After header). */
    readonly retryAfter?: number,
  ) {
    super(status, message, retryAfter === undefined ? undefined : { 'retry-after': String(retryAfter) });
  }

  /** The request's fault (400, 413), or a temporary refusal that a retry may get past (429, 503). */
  get temporary(): boolean {
    return this.status === 429 || this.status === 503;
  }

  static bodyTooLarge(): RequestLimitError {
    return new RequestLimitError('TOLLGATE_ERR_BODY_TOO_LARGE', 413, `The request body must not exceed ${MAX_PARAMETER_BODY} bytes`);
  }

  static tooManyParameters(): RequestLimitError {
    return new RequestLimitError('TOLLGATE_ERR_TOO_MANY_PARAMETERS', 400, `At most ${MAX_PARAMETERS} parameters are read from the query and from the body`);
  }

  static hashingBusy(): RequestLimitError {
    return new RequestLimitError('TOLLGATE_ERR_HASHING_BUSY', 503, 'Too many credential checks are in progress; retry later', 1);
  }

  /** This client address failed too many checks of secrets lately (GuessThrottle). */
  static addressLocked(retryAfter: number): RequestLimitError {
    const message = `Too many failed authentications from this address; retry in ${retryAfter} seconds`;
    return new RequestLimitError('TOLLGATE_ERR_ADDRESS_LOCKED', 429, message, retryAfter);
  }

  /** This client address has as many checks of secrets in progress as it may have (GuessThrottle). */
  static addressBusy(): RequestLimitError {
    return new RequestLimitError('TOLLGATE_ERR_ADDRESS_BUSY', 429, 'Too many credential checks from this address are in progress; retry later', 1);
  }

  /** The credential failed too many checks from many addresses; this address waits for the next probe (GuessThrottle). */
  static credentialLocked(retryAfter: number): RequestLimitError {
    const message = `Too many failed authentications of this credential; retry in ${retryAfter} seconds`;
    return new RequestLimitError('TOLLGATE_ERR_CREDENTIAL_LOCKED', 429, message, retryAfter);
  }
}
