/** OAuth 2.0 answers as Kong's plugin gives them: JSON bodies, cache headers, `WWW-Authenticate`. */
import { challenge, RequestLimitError, type AccessContext } from '../../src/pdk/index.ts';
import type { OAuth2Config } from './schema.ts';

/**
 * The error codes the plugin answers with: RFC 6749 §4.1.2.1 and §5.2, RFC 6750 §3.1 (`invalid_token`), and
 * Kong's own (`invalid_method`, `invalid_provision_key`, `invalid_authenticated_userid`). A union, so a typo
 * is a type error rather than a code no client knows.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'temporarily_unavailable'
  | 'invalid_token'
  | 'invalid_method'
  | 'invalid_provision_key'
  | 'invalid_authenticated_userid';

export interface OAuthError {
  error: OAuthErrorCode;
  error_description: string;
}

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;

export function oauthError(error: OAuthErrorCode, description: string): OAuthError {
  return { error, error_description: description };
}

/**
 * `Bearer realm="…", error="…", error_description="…"` (Kong ≥ 3.10 delimiter). Kong leaves a `"` of the
 * realm unescaped, which ends the value early for a client's parser; here it is escaped.
 */
export function bearerChallenge(config: OAuth2Config, error?: OAuthError): string {
  return challenge('Bearer', { realm: config.realm, error: error?.error, error_description: error?.error_description });
}

export type Endpoint = 'token' | 'authorization' | 'introspection' | 'revocation';

/** 405 for a non-POST request on an endpoint (before the HTTPS check, as Kong). */
export function rejectMethod(ctx: AccessContext, config: OAuth2Config, endpoint: Endpoint): void {
  const error = oauthError('invalid_method', `The HTTP method ${ctx.method} is invalid for the ${endpoint} endpoint`);
  ctx.respond(405, error, { 'www-authenticate': bearerChallenge(config, error) });
}

/**
 * Kong's `check_https`: the connection is TLS, or (with `accept_http_if_already_terminated`) a trusted
 * proxy says `X-Forwarded-Proto: https`. Returns the error, or undefined when fine.
 */
function httpsError(ctx: AccessContext, config: OAuth2Config): OAuthError | undefined {
  if (ctx.scheme === 'https') return undefined;
  // The core believes only trusted peers' X-Forwarded-Proto (and keeps its first value).
  if (config.accept_http_if_already_terminated && ctx.forwardedProto === 'https') {
    const sent = ctx.headers['x-forwarded-proto'];
    if (Array.isArray(sent) || String(sent).includes(',')) return oauthError('access_denied', 'Only one X-Forwarded-Proto header allowed');
    return undefined;
  }
  return oauthError('access_denied', 'You must use HTTPS');
}

/** What stops any endpoint before its own checks: plain HTTP, then a repeated parameter (RFC 6749 §5.2). */
export function requestError(ctx: AccessContext, config: OAuth2Config, repeated: string | undefined): OAuthError | undefined {
  const insecure = httpsError(ctx, config);
  if (insecure || repeated === undefined) return insecure;
  return oauthError('invalid_request', `The ${repeated} parameter must not be sent more than once`);
}

/** An endpoint's JSON answer with `Cache-Control: no-store` and `Pragma: no-cache`. */
export function respondNoStore(ctx: AccessContext, status: number, body: object, headers: Record<string, string> = {}): void {
  ctx.respond(status, body, { ...NO_STORE, ...headers });
}

/**
 * Runs an endpoint, answering a RequestLimitError it throws as an OAuth error: `temporarily_unavailable`
 * (with Retry-After) when a retry may succeed, `invalid_request` otherwise.
 */
export async function answeringLimits(ctx: AccessContext, endpoint: () => Promise<void>): Promise<void> {
  try {
    await endpoint();
  } catch (err) {
    if (!(err instanceof RequestLimitError)) throw err;
    const retryAfter: Record<string, string> = err.retryAfter === undefined ? {} : { 'retry-after': String(err.retryAfter) };
    const error = err.temporary ? 'temporarily_unavailable' : 'invalid_request';
    respondNoStore(ctx, err.status, oauthError(error, err.message), retryAfter);
  }
}
