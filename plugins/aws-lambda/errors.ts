/** The aws-lambda plugin's errors (listed in docs/errors.md). */

/** The Lambda service could not be invoked (no region or credentials, unreachable, slow, refusing): Kong's 500, logged. */
export class LambdaInvokeError extends Error {
  override readonly name = 'LambdaInvokeError';
  readonly code = 'AWS_LAMBDA_ERR_INVOKE';
}

/** A function's API Gateway proxy response Kong refuses: the client gets Kong's 502 with the reason. */
export class ProxyResponseError extends Error {
  override readonly name = 'ProxyResponseError';
  readonly code = 'AWS_LAMBDA_ERR_PROXY_RESPONSE';
}
