/**
 * `POST …/oauth2/token`: Kong's `issue_token` (grant type, client credentials, redirect URI and client
 * authentication checked in that order, the last failure winning), then the grant itself. Where Kong
 * departs from RFC 6749, the RFC's error codes are used (RFC 6749 §5.2: invalid_grant, unauthorized_client).
 */
import { safeEqual, type AccessContext, type Params } from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { bindingOf, isBoundHere, requiresPkce, retrieveClientCredentials, retrieveScope, s256, userIdError, type EndpointDeps, type Plugin } from './grants.ts';
import { readParams, userIdParam } from './params.ts';
import { oauthError, rejectMethod, requestError, respondNoStore, type OAuthError, type OAuthErrorCode } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import type { CodeRow, IssuedToken, IssueRequest, TokenRow } from './tokens.ts';

/** An error answer: 400, or 401 with a Basic challenge when the client authenticated through the header. */
export interface Failure extends OAuthError {
  basicChallenge?: boolean;
}

type Refusal = { failure: Failure };
type Outcome = Refusal | { body: Params };

const failWith = (error: OAuthErrorCode, description: string, basicChallenge = false): Refusal => ({
  failure: { ...oauthError(error, description), basicChallenge },
});

export async function tokenEndpoint(ctx: AccessContext, config: OAuth2Config, plugin: Plugin, deps: EndpointDeps): Promise<void> {
  if (ctx.method !== 'POST') return rejectMethod(ctx, config, 'token');
  const { params, repeated } = await readParams(ctx);
  const malformed = requestError(ctx, config, repeated);
  const outcome: Outcome = malformed ? { failure: malformed } : await issueToken(ctx, config, plugin, params, deps);
  respondOutcome(ctx, outcome, params);
}

export function respondOutcome(ctx: AccessContext, outcome: Outcome, params: Params): void {
  const state = params.state !== undefined ? { state: params.state } : {};
  if ('body' in outcome) return respondNoStore(ctx, 200, { ...outcome.body, ...state });
  const { basicChallenge, ...error } = outcome.failure;
  if (basicChallenge) return respondNoStore(ctx, 401, { ...error, ...state }, { 'www-authenticate': 'Basic realm="OAuth2.0"' });
  respondNoStore(ctx, 400, { ...error, ...state });
}

/** The token response (also the implicit grant's fragment); `scope` whenever one was granted (RFC 6749 §5.1). */
export function tokenResponse(issued: IssuedToken, refreshToken = issued.refreshToken): Params {
  const body: Params = { access_token: issued.accessToken, token_type: 'bearer' };
  if (issued.row.expires_in > 0) body.expires_in = issued.row.expires_in;
  if (refreshToken) body.refresh_token = refreshToken;
  if (issued.row.scope) body.scope = issued.row.scope;
  return body;
}

function grantAllowed(grant: unknown, config: OAuth2Config): boolean {
  return (
    grant === 'authorization_code' ||
    grant === 'refresh_token' ||
    (grant === 'client_credentials' && config.enable_client_credentials) ||
    (grant === 'password' && config.enable_password_grant)
  );
}

/** A token request that passed the common checks, with what the grant needs. */
interface GrantRequest {
  ctx: AccessContext;
  config: OAuth2Config;
  plugin: Plugin;
  params: Params;
  deps: EndpointDeps;
  /** Always set except for client_credentials, where an unknown client is the grant's own error. */
  client: OAuth2Credential | undefined;
  /** The redirect URI the request names or defaults to (all grants but client_credentials). */
  redirectUri: string | undefined;
  /** The client authenticated with HTTP Basic: an unknown client gets 401 and a Basic challenge. */
  fromHeader: boolean;
}

async function issueToken(ctx: AccessContext, config: OAuth2Config, plugin: Plugin, params: Params, deps: EndpointDeps): Promise<Outcome> {
  const checked = await checkTokenRequest(ctx, config, params, deps);
  if ('failure' in checked) return checked;
  const request: GrantRequest = { ctx, config, plugin, params, deps, ...checked };
  switch (params.grant_type) {
    case 'client_credentials':
      return clientCredentialsGrant(request);
    case 'password':
      return passwordGrant(request);
    case 'authorization_code':
      return redeemCode(request);
    default:
      return refreshToken(request);
  }
}

/** Kong's step 3: grant type, client, redirect URI, client authentication; the last failure wins. */
async function checkTokenRequest(
  ctx: AccessContext,
  config: OAuth2Config,
  params: Params,
  deps: EndpointDeps,
): Promise<Refusal | Pick<GrantRequest, 'client' | 'redirectUri' | 'fromHeader'>> {
  let failure: Refusal | undefined;
  const grant = params.grant_type;
  if (!grantAllowed(grant, config)) failure = failWith('unsupported_grant_type', 'Invalid grant_type');

  const { clientId, clientSecret, fromHeader } = retrieveClientCredentials(ctx, params, config);
  const client = typeof clientId === 'string' && clientId !== '' ? deps.credentials.byClientId(clientId) : undefined;

  let redirectUri: string | undefined;
  if (grant !== 'client_credentials') {
    if (client?.redirect_uris?.length) {
      redirectUri = typeof params.redirect_uri === 'string' ? params.redirect_uri : client.redirect_uris[0];
      if (!client.redirect_uris.includes(redirectUri)) {
        failure = failWith('invalid_request', 'Invalid redirect_uri that does not match with any redirect_uri created with the application');
      }
    } else {
      failure = failWith('invalid_client', 'Invalid client authentication', fromHeader);
    }
  }
  if (client) failure = (await checkClientSecret(ctx, client, clientSecret, fromHeader, deps)) ?? failure;
  return failure ?? { client, redirectUri, fromHeader };
}

/** A new token, bound here (or, for a refresh, where the refreshed token was bound: a refresh never widens it). */
function issue(request: GrantRequest, fields: TokenFields): Promise<IssuedToken> {
  return request.deps.tokens.issue(issueRequest(request, fields));
}

type TokenFields = { scope: string | null; authenticatedUserid: string | null; withRefreshToken: boolean; binding?: string | null };

function issueRequest(request: GrantRequest, fields: TokenFields): IssueRequest {
  return {
    credential: request.client!.id,
    binding: bindingOf(request.ctx, request.config),
    expiresIn: request.config.token_expiration,
    refreshTokenTtl: request.config.refresh_token_ttl,
    ...fields,
  };
}

async function clientCredentialsGrant(request: GrantRequest): Promise<Outcome> {
  const { params, config, client } = request;
  if (params.authenticated_userid !== undefined && !provisionKeyMatches(params, config)) {
    return failWith('invalid_provision_key', 'Invalid provision_key');
  }
  // RFC 6749 §5.2: 401 when the client tried HTTP Basic (Kong answers 400 for this grant only).
  if (!client) return failWith('invalid_client', 'Invalid client authentication', request.fromHeader);
  // RFC 6749 §4.4: confidential clients only (Kong lets public clients in without any secret).
  if (client.client_type === 'public') return failWith('unauthorized_client', 'The client_credentials grant is only for confidential clients');
  const badUserId = userIdError(params);
  if (badUserId) return { failure: badUserId };
  const scope = retrieveScope(params, config);
  if (scope.error) return { failure: scope.error };
  const issued = await issue(request, { scope: scope.scope, authenticatedUserid: userIdParam(params) ?? null, withRefreshToken: false });
  return { body: tokenResponse(issued) };
}

/** The legacy password grant: the operator's back end vouches for the user with the provision key. */
async function passwordGrant(request: GrantRequest): Promise<Outcome> {
  const { params, config } = request;
  if (!provisionKeyMatches(params, config)) return failWith('invalid_provision_key', 'Invalid provision_key');
  const authenticatedUserid = userIdParam(params);
  if (authenticatedUserid === undefined) return failWith('invalid_authenticated_userid', 'Missing authenticated_userid parameter');
  const badUserId = userIdError(params);
  if (badUserId) return { failure: badUserId };
  const scope = retrieveScope(params, config);
  if (scope.error) return { failure: scope.error };
  return { body: tokenResponse(await issue(request, { scope: scope.scope, authenticatedUserid, withRefreshToken: true })) };
}

/** Confidential clients prove their secret; public clients must not send one. */
async function checkClientSecret(
  ctx: AccessContext,
  client: OAuth2Credential,
  secret: unknown,
  fromHeader: boolean,
  deps: EndpointDeps,
): Promise<Refusal | undefined> {
  if (client.client_type === 'public') {
    return typeof secret === 'string' && secret.trim() !== ''
      ? failWith('invalid_request', 'client_secret is disallowed for public clients')
      : undefined;
  }
  return (await deps.credentials.verifySecret(client, secret, ctx.clientIp)) ? undefined : failWith('invalid_client', 'Invalid client authentication', fromHeader);
}

function provisionKeyMatches(params: Params, config: OAuth2Config): boolean {
  return typeof params.provision_key === 'string' && safeEqual(params.provision_key, config.provision_key);
}

/** RFC 7636 §4.1: `code-verifier = 43*128unreserved` (Kong checks only the length). */
const VERIFIER_CHARACTERS = /^[A-Za-z0-9._~-]*$/;

/**
 * A code is spent once its own client presents it, whatever the outcome (RFC 6749 §4.1.2: used once;
 * RFC 9700: limit the attempts on a code), so a wrong PKCE verifier cannot be followed by another guess.
 * A refused code is taken (the store's atomic read-and-delete); a good one is taken in the same step that
 * issues its token. Either way of two concurrent redemptions exactly one wins.
 */
async function redeemCode(request: GrantRequest): Promise<Outcome> {
  const { ctx, config, plugin, params, deps } = request;
  const client = request.client!;
  const code = params.code;
  if (typeof code !== 'string' || code === '') return failWith('invalid_request', 'Invalid code');
  // RFC 6749 §5.2: unknown, used, expired or foreign codes are `invalid_grant` (Kong: invalid_request).
  // Presented by another client or at another service, the code is left for its own client.
  const seen = await deps.tokens.findCode(code);
  const binding = bindingOf(ctx, config);
  if (!seen || (binding !== null && seen.row.binding !== binding) || seen.row.credential !== client.id) return failWith('invalid_grant', 'Invalid code');
  const refusal = checkCodeRedemption(request, seen.row);
  if (refusal) return (await deps.tokens.takeCode(code)) ? refusal : failWith('invalid_grant', 'Invalid code');
  const fields = { scope: seen.row.scope, authenticatedUserid: seen.row.authenticated_userid, withRefreshToken: true };
  const issued = await deps.tokens.redeemCode(code, seen, issueRequest(request, fields));
  return issued ? { body: tokenResponse(issued) } : failWith('invalid_grant', 'Invalid code');
}

/** PKCE, the issuing plugin and the redirect URI of a code its client presented; a refusal, or undefined. */
function checkCodeRedemption(request: GrantRequest, row: CodeRow): Refusal | undefined {
  const { config, plugin, params } = request;
  const verifier = params.code_verifier;
  // A verifier for a code issued without a challenge is refused too (PKCE downgrade, RFC 9700 §2.1.1).
  const verifierSent = verifier !== undefined && verifier !== null && verifier !== '';
  if (requiresPkce(config, request.client!, row.challenge_method !== null || verifierSent)) {
    if (verifier === undefined || verifier === null) return failWith('invalid_request', 'code_verifier is required for PKCE authorization requests');
    if (typeof verifier !== 'string') return failWith('invalid_request', 'code_verifier is not a string');
    if (verifier.length < 43 || verifier.length > 128) return failWith('invalid_request', 'code_verifier must be between 43 and 128 characters');
    if (!VERIFIER_CHARACTERS.test(verifier)) return failWith('invalid_request', 'code_verifier may only contain A-Z, a-z, 0-9, "-", ".", "_" and "~"');
    if (row.challenge === null || !safeEqual(s256(verifier), row.challenge)) return failWith('invalid_grant', 'Invalid code');
  }
  if (config.global_credentials && row.plugin && row.plugin !== plugin.id) return failWith('invalid_grant', 'Invalid code');
  // RFC 6749 §4.1.3: the code is only good with the redirect URI it was issued for.
  if (row.redirect_uri !== request.redirectUri) return failWith('invalid_grant', 'Invalid redirect_uri: it must be the one of the authorization request');
  return undefined;
}

/**
 * A refresh token is redeemed once cluster-wide: the redemption replaces (or, with `reuse_refresh_token`,
 * renews) the row it read in one compare-and-set, so of concurrent redemptions exactly one succeeds and the
 * others are `invalid_grant`, as an already used token is.
 */
async function refreshToken(request: GrantRequest): Promise<Outcome> {
  const { ctx, config, params, deps } = request;
  const client = request.client!;
  const refresh = params.refresh_token;
  if (typeof refresh !== 'string' || refresh === '') return failWith('invalid_request', 'Invalid refresh_token');
  const row = await deps.tokens.findByRefreshToken(refresh);
  // RFC 6749 §5.2: unknown, foreign or another client's refresh tokens are `invalid_grant`. Foreign as for
  // access tokens: a global plugin takes global tokens and its own service's, never another service's (Kong
  // skips that check and would turn the grant into a global token, good on every global service).
  if (!row || !isBoundHere(row, ctx, config) || row.credential !== client.id) return failWith('invalid_grant', 'Invalid refresh_token');
  if (!scopeStillAllowed(row, config)) return failWith('invalid_scope', 'Scope mismatch');
  if (!withinGrantedScope(params.scope, row)) return failWith('invalid_scope', 'The requested scope exceeds the scope granted by the resource owner');
  if (config.reuse_refresh_token) {
    const renewed = await deps.tokens.renewAccessToken(row, config.token_expiration, config.refresh_token_ttl);
    return renewed ? { body: tokenResponse(renewed, refresh) } : failWith('invalid_grant', 'Invalid refresh_token');
  }
  const fields = { scope: row.scope, authenticatedUserid: row.authenticated_userid, withRefreshToken: true, binding: row.binding };
  const exchanged = await deps.tokens.exchange(row, issueRequest(request, fields));
  return exchanged ? { body: tokenResponse(exchanged) } : failWith('invalid_grant', 'Invalid refresh_token');
}

/**
 * RFC 6749 §6: a refresh may not ask for a scope the resource owner did not grant (Kong ignores `scope`
 * here). A narrower request is answered with the granted scope, which the response names (§3.3).
 */
function withinGrantedScope(requested: unknown, row: TokenRow): boolean {
  if (typeof requested !== 'string' || requested.trim() === '') return true;
  const granted = new Set((row.scope ?? '').split(' '));
  return requested.split(/\s+/).every((item) => item === '' || granted.has(item));
}

/** Kong: every scope of the token must still be among the current plugin's scopes. */
function scopeStillAllowed(row: TokenRow, config: OAuth2Config): boolean {
  if (!row.scope) return true;
  return row.scope.split(' ').every((item) => config.scopes?.includes(item));
}
