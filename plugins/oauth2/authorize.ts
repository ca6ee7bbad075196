/**
 * `POST …/oauth2/authorize`: the operator's back end, having authenticated the user, asks for a code
 * (or an implicit token) and gets back JSON `{redirect_uri}` (200, or 400 with the error in the URI).
 * Kong's validation order: HTTPS, provision_key and authenticated_userid stop at once; then response
 * type, scope, client and redirect URI, PKCE, where the last failing check wins.
 */
import { safeEqual, type AccessContext, type Params } from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { bindingOf, retrieveCodeChallenge, retrieveScope, userIdError, type EndpointDeps, type Plugin } from './grants.ts';
import { readParams, stringParam, userIdParam } from './params.ts';
import { composeRedirectUri } from './redirect.ts';
import { oauthError, rejectMethod, requestError, respondNoStore, type OAuthError } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import { tokenResponse } from './token-endpoint.ts';

/** The outcome of steps 4–7: an error (with where to send it, if anywhere), or everything a grant needs. */
type AuthorizationCheck =
  | { error: OAuthError; redirectTarget?: string }
  | {
      error?: undefined;
      client: OAuth2Credential;
      redirectUri: string;
      scope: string | null;
      challenge: string | null;
      challengeMethod: 'S256' | null;
      implicit: boolean;
    };

export async function authorizeEndpoint(ctx: AccessContext, config: OAuth2Config, plugin: Plugin, deps: EndpointDeps): Promise<void> {
  if (ctx.method !== 'POST') return rejectMethod(ctx, config, 'authorization');
  const { params, repeated } = await readParams(ctx);
  const withState = (body: Params): Params => (params.state !== undefined ? { ...body, state: params.state } : body);
  const stopError =
    requestError(ctx, config, repeated) ??
    (typeof params.provision_key !== 'string' || !safeEqual(params.provision_key, config.provision_key)
      ? oauthError('invalid_provision_key', 'Invalid provision_key')
      : undefined) ??
    (userIdParam(params) === undefined ? oauthError('invalid_authenticated_userid', 'Missing authenticated_userid parameter') : undefined) ??
    userIdError(params);
  if (stopError) return respondNoStore(ctx, 400, withState({ ...stopError }));

  const check = checkRequest(params, config, deps);
  if (check.error) {
    const body = withState({ ...check.error });
    if (check.redirectTarget === undefined) return respondNoStore(ctx, 400, body);
    // RFC 6749 §4.2.2.1: a client that asked for a token reads errors from the fragment too (Kong: the query).
    return respondNoStore(ctx, 400, { redirect_uri: composeRedirectUri(check.redirectTarget, body, params.response_type === 'token') });
  }
  const granted = withState(await grant(ctx, config, plugin, deps, check, userIdParam(params)!));
  respondNoStore(ctx, 200, { redirect_uri: composeRedirectUri(check.redirectUri, granted, check.implicit) });
}

/** Kong's steps 4–7; each failing check replaces the previous error. */
function checkRequest(params: Params, config: OAuth2Config, deps: EndpointDeps): AuthorizationCheck {
  let error: OAuthError | undefined;
  const code = params.response_type === 'code' && config.enable_authorization_code;
  const implicit = params.response_type === 'token' && config.enable_implicit_grant;
  if (!code && !implicit) error = oauthError('unsupported_response_type', 'Invalid response_type');

  const scope = retrieveScope(params, config);
  if (scope.error) error = scope.error;

  const clientId = stringParam(params, 'client_id');
  const client = clientId !== undefined ? deps.credentials.byClientId(clientId) : undefined;
  const registered = client?.redirect_uris ?? [];
  let redirectUri: string | undefined;
  if (!client || registered.length === 0) {
    error = oauthError('invalid_client', 'Invalid client authentication');
  } else {
    redirectUri = typeof params.redirect_uri === 'string' ? params.redirect_uri : registered[0];
    if (!registered.includes(redirectUri)) {
      error = oauthError('invalid_request', 'Invalid redirect_uri that does not match with any redirect_uri created with the application');
      redirectUri = undefined;
    }
  }

  const pkce = retrieveCodeChallenge(params, config, client);
  if (pkce.error) error = pkce.error;

  if (error || !client || scope.error || pkce.error || redirectUri === undefined) {
    return { error: error!, redirectTarget: redirectUri ?? registered[0] };
  }
  return { client, redirectUri, scope: scope.scope, challenge: pkce.challenge, challengeMethod: pkce.method, implicit };
}

/** A code (kept 5 minutes, hashed) or, for the implicit grant, a token without refresh token. */
async function grant(
  ctx: AccessContext,
  config: OAuth2Config,
  plugin: Plugin,
  deps: EndpointDeps,
  check: Exclude<AuthorizationCheck, { error: OAuthError }>,
  authenticatedUserid: string,
): Promise<Params> {
  if (check.implicit) {
    const issued = await deps.tokens.issue({
      credential: check.client.id,
      binding: bindingOf(ctx, config),
      scope: check.scope,
      authenticatedUserid,
      expiresIn: config.token_expiration,
      withRefreshToken: false,
      refreshTokenTtl: config.refresh_token_ttl,
    });
    return tokenResponse(issued);
  }
  const code = await deps.tokens.saveCode({
    credential: check.client.id,
    binding: bindingOf(ctx, config),
    plugin: plugin.id,
    authenticated_userid: authenticatedUserid,
    scope: check.scope,
    challenge: check.challenge,
    challenge_method: check.challengeMethod,
    redirect_uri: check.redirectUri,
  });
  return { code };
}
