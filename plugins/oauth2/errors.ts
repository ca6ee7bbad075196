/**
 * The plugin's own failures, each with a stable `code` and `name` (as fastify's `FST_ERR_*` and undici's
 * `UND_ERR_*`). The OAuth error an endpoint answers with is chosen where the error is caught.
 */

/** Kong reads at most 100 arguments of a query and of a body (OpenResty's get_uri_args/get_post_args). */
export const MAX_PARAMETERS = 100;

/**
 * The largest body parameters are read from. Kong reads them only from a body nginx holds in memory
 * (`client_body_buffer_size`, 8 KiB by default) and sees no parameters in a larger one; 16 KiB (what
 * Node allows for all the request's headers) leaves room for long `state` and `redirect_uri` values.
 */
export const MAX_PARAMETER_BODY = 16 * 1024;

export class ParameterLimitError extends Error {
  override readonly name = 'ParameterLimitError';
  private constructor(
    readonly code: 'TG_ERR_OAUTH2_BODY_TOO_LARGE' | 'TG_ERR_OAUTH2_TOO_MANY_PARAMETERS',
    readonly status: 400 | 413,
    message: string,
  ) {
    super(message);
  }

  static bodyTooLarge(): ParameterLimitError {
    return new ParameterLimitError('TG_ERR_OAUTH2_BODY_TOO_LARGE', 413, `The request body must not exceed ${MAX_PARAMETER_BODY} bytes`);
  }

  static tooMany(): ParameterLimitError {
    return new ParameterLimitError('TG_ERR_OAUTH2_TOO_MANY_PARAMETERS', 400, `At most ${MAX_PARAMETERS} parameters are read from the query and from the body`);
  }
}
