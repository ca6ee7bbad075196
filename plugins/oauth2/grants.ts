/** Pieces shared by the endpoints: client credentials, scopes, PKCE, header lookup, token bindings. */
import { createHash } from 'node:crypto';
import { decodeArg, findHeader, headerValueProblem, type AccessContext, type Params, type PluginEntity } from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import type { CredentialDirectory } from './credentials.ts';
import { userIdParam } from './params.ts';
import { oauthError, type OAuthError } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import type { TokenStore } from './tokens.ts';

export interface ClientCredentials {
  clientId: unknown;
  clientSecret: unknown;
  /** Sent as HTTP Basic in the configured header: failures answer 401 with a Basic challenge. */
  fromHeader: boolean;
}

/** Kong's `retrieve_client_credentials`: body/query pair, else Basic in `auth_header_name`, else `client_id` alone. */
export function retrieveClientCredentials(ctx: AccessContext, params: Params, config: OAuth2Config): ClientCredentials {
  if (params.client_id !== undefined && params.client_secret !== undefined) {
    return { clientId: params.client_id, clientSecret: params.client_secret, fromHeader: false };
  }
  const header = findHeader(ctx, config.auth_header_name);
  if (header) {
    // Kong's pattern is `\s*[Bb]asic\s*(.+)` anywhere in the value; the scheme is case-insensitive (RFC 7235
    // §2.1) and must open the value, or `Bearer basic…` would authenticate a client.
    const basic = /^\s*basic\s*(.+)/i.exec(header.value);
    if (!basic) return { clientId: undefined, clientSecret: undefined, fromHeader: true };
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    // RFC 6749 §2.3.1: both parts are form-urlencoded (client libraries send `acme%2Dapp`); Kong does not
    // decode, which changes nothing for its alphanumeric ids and secrets.
    return colon < 0
      ? { clientId: decodeArg(decoded), clientSecret: undefined, fromHeader: true }
      : { clientId: decodeArg(decoded.slice(0, colon)), clientSecret: decodeArg(decoded.slice(colon + 1)), fromHeader: true };
  }
  return { clientId: params.client_id, clientSecret: undefined, fromHeader: false };
}

/**
 * The user id a token will carry upstream as X-Authenticated-Userid must be a header value: refused when
 * issuing, or every use of the token would fail (CR/LF) or reach the upstream as another user (outer spaces).
 */
export function userIdError(params: Params): OAuthError | undefined {
  const userid = userIdParam(params);
  const problem = userid === undefined ? undefined : headerValueProblem(userid);
  return problem === undefined ? undefined : oauthError('invalid_request', `authenticated_userid ${problem}`);
}

export type ScopeResult = { scope: string | null; error?: undefined } | { error: OAuthError };

/** Kong's `retrieve_scope`: checks the `scope` parameter against `config.scopes`. */
export function retrieveScope(params: Params, config: OAuth2Config): ScopeResult {
  const requested = params.scope;
  // RFC 6749 §3.1/§3.2: a parameter without a value counts as omitted, so `scope=` cannot get around
  // mandatory_scope (Kong lets a blank scope through).
  const present = requested !== undefined && requested !== null && !(typeof requested === 'string' && requested.trim() === '');
  if (config.scopes && present) {
    if (typeof requested !== 'string') return { error: oauthError('invalid_scope', 'scope must be a string') };
    const items = requested.split(/\s+/).filter(Boolean);
    const invalid = items.find((item) => !config.scopes!.includes(item));
    if (invalid !== undefined) return { error: oauthError('invalid_scope', `"${invalid}" is an invalid scope`) };
    return { scope: items.length ? items.join(' ') : null };
  }
  if (!present && config.mandatory_scope) return { error: oauthError('invalid_scope', 'You must specify a scope') };
  return { scope: null };
}

/** Kong's `requires_pkce`. */
export function requiresPkce(config: OAuth2Config, client: OAuth2Credential, usedPkce: boolean): boolean {
  if (usedPkce) return true;
  return client.client_type === 'public' ? config.pkce !== 'none' : config.pkce === 'strict';
}

export type ChallengeResult = { challenge: string | null; method: 'S256' | null; error?: undefined } | { error: OAuthError };

/** Kong's `retrieve_code_challenge` (method defaults to S256; only S256; challenge normalized to base64url). */
export function retrieveCodeChallenge(params: Params, config: OAuth2Config, client: OAuth2Credential | undefined): ChallengeResult {
  const challenge = params.code_challenge;
  const method = params.code_challenge_method;
  const hasChallenge = challenge !== undefined && challenge !== null && challenge !== '';
  if (method !== undefined && method !== null && !hasChallenge) {
    return { error: oauthError('invalid_request', 'code_challenge is required when code_method is present') };
  }
  if (hasChallenge) {
    if (method !== undefined && method !== null && method !== 'S256' && method !== 's256') {
      return { error: oauthError('invalid_request', 'code_challenge_method is not supported, must be S256') };
    }
    return { challenge: normalizeChallenge(String(challenge)), method: 'S256' };
  }
  if (client && requiresPkce(config, client, false)) {
    return { error: oauthError('invalid_request', `code_challenge is required for ${client.client_type} clients`) };
  }
  return { challenge: null, method: null };
}

/** Standard or url-safe base64, padded or not, becomes unpadded base64url; anything else is kept as is. */
function normalizeChallenge(challenge: string): string {
  const standard = challenge.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
  if (!/^[A-Za-z0-9+/]*$/.test(standard) || standard.length % 4 === 1) return challenge;
  return Buffer.from(standard, 'base64').toString('base64url');
}

export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/**
 * What a token or code is bound to: nothing with `global_credentials`, else the route's service (Kong),
 * or the route itself on a service-less route (Kong has none).
 */
export function bindingOf(ctx: AccessContext, config: OAuth2Config): string | null {
  return config.global_credentials ? null : ownBinding(ctx);
}

function ownBinding(ctx: AccessContext): string {
  return ctx.service ? `service:${ctx.service.id}` : `route:${ctx.route.id}`;
}

/** Service-bound tokens only on their service (or service-less route); global ones where credentials are global. */
export function isBoundHere(row: { binding: string | null }, ctx: AccessContext, config: OAuth2Config): boolean {
  return row.binding === null ? config.global_credentials : row.binding === ownBinding(ctx);
}

export type Plugin = PluginEntity<OAuth2Config>;

/** What the endpoints work with. */
export interface EndpointDeps {
  credentials: CredentialDirectory;
  tokens: TokenStore;
}
