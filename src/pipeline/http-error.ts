/** The error a plugin or the core throws to end a request with a status; the pipeline answers with it. */
export class HttpError extends Error {
  override readonly name: string = 'HttpError';
  /** Stable across releases: a string here, Kong's numeric database error code in the admin API's errors. */
  readonly code: string | number = 'TG_ERR_HTTP';

  constructor(
    readonly status: number,
    message: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  /** The JSON body the admin API answers with (Kong's `{"message": ...}`). */
  body(): object {
    return { message: this.message };
  }
}
