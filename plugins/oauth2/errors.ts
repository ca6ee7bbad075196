/**
 * The plugin's refusals of requests that ask for more work than it does for anyone, each with a stable
 * `code` and `name` (as fastify's `FST_ERR_*` and undici's `UND_ERR_*`). The endpoints answer them as
 * OAuth errors (see answeringLimits in responses.ts); protected routes treat an unreadable body as one
 * without a token.
 */

/** Kong reads at most 100 arguments of a query and of a body (OpenResty's get_uri_args/get_post_args). */
export const MAX_PARAMETERS = 100;

/**
 * The largest body parameters are read from. Kong reads them only from a body nginx holds in memory
 * (`client_body_buffer_size`, 8 KiB by default) and sees no parameters in a larger one; 16 KiB (what
 * Node allows for all the request's headers) leaves room for long `state` and `redirect_uri` values.
 */
export const MAX_PARAMETER_BODY = 16 * 1024;

export type LimitCode =
  | 'TG_ERR_OAUTH2_BODY_TOO_LARGE'
  | 'TG_ERR_OAUTH2_TOO_MANY_PARAMETERS'
  | 'TG_ERR_OAUTH2_HASHING_BUSY'
  | 'TG_ERR_OAUTH2_CLIENT_LOCKED';

export class LimitError extends Error {
  override readonly name = 'LimitError';
  private constructor(
    readonly code: LimitCode,
    readonly status: 400 | 413 | 429 | 503,
    /** The RFC 6749 error code the endpoints answer with. */
    readonly oauthError: 'invalid_request' | 'temporarily_unavailable',
    message: string,
    /** Seconds after which trying again may succeed (the Retry-After header). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }

  static bodyTooLarge(): LimitError {
    return new LimitError('TG_ERR_OAUTH2_BODY_TOO_LARGE', 413, 'invalid_request', `The request body must not exceed ${MAX_PARAMETER_BODY} bytes`);
  }

  static tooManyParameters(): LimitError {
    const message = `At most ${MAX_PARAMETERS} parameters are read from the query and from the body`;
    return new LimitError('TG_ERR_OAUTH2_TOO_MANY_PARAMETERS', 400, 'invalid_request', message);
  }

  static hashingBusy(): LimitError {
    const message = 'Too many client authentications are in progress; retry later';
    return new LimitError('TG_ERR_OAUTH2_HASHING_BUSY', 503, 'temporarily_unavailable', message, 1);
  }

  static clientLocked(retryAfter: number): LimitError {
    const message = `Too many failed authentications of this client; retry in ${retryAfter} seconds`;
    return new LimitError('TG_ERR_OAUTH2_CLIENT_LOCKED', 429, 'temporarily_unavailable', message, retryAfter);
  }
}
