/**
 * `POST …/oauth2/authorize`: the operator's back end, having authenticated the user, asks for a code
 * (or an implicit token) and gets back JSON `{redirect_uri}` (200, or 400 with the error in the URI).
 * Kong's validation order: HTTPS, provision_key and authenticated_userid stop at once; then response
 * type, scope, client and redirect URI, PKCE, where the last failing check wins.
 */
import type { RequestContext } from '../../src/pipeline/plugin-api.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { bindingOf, retrieveCodeChallenge, retrieveScope, type EndpointDeps, type Plugin } from './grants.ts';
import { readParams, stringParam, userIdParam, type Params } from './params.ts';
import { composeRedirectUri } from './redirect.ts';
import { httpsError, oauthError, rejectMethod, respondNoStore, type OAuthError } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import { safeEqual } from './secret.ts';
import { tokenResponse } from './token-endpoint.ts';

export async function authorizeEndpoint(ctx: RequestContext, config: OAuth2Config, plugin: Plugin, deps: EndpointDeps): Promise<void> {
  if (ctx.method !== 'POST') return rejectMethod(ctx, config, 'authorization');
  const params = await readParams(ctx);
  const stateOf = (body: object): object => (params.state !== undefined ? { ...body, state: params.state } : body);
  const insecure = httpsError(ctx, config);
  if (insecure) return respondNoStore(ctx, 400, stateOf(insecure));

  const provisionKey = params.provision_key;
  if (typeof provisionKey !== 'string' || !safeEqual(provisionKey, config.provision_key)) {
    return respondNoStore(ctx, 400, stateOf(oauthError('invalid_provision_key', 'Invalid provision_key')));
  }
  const authenticatedUserid = userIdParam(params);
  if (authenticatedUserid === undefined) {
    return respondNoStore(ctx, 400, stateOf(oauthError('invalid_authenticated_userid', 'Missing authenticated_userid parameter')));
  }

  let error: OAuthError | undefined;
  const responseType = params.response_type;
  const isCode = responseType === 'code' && config.enable_authorization_code;
  const isImplicit = responseType === 'token' && config.enable_implicit_grant;
  if (!isCode && !isImplicit) error = oauthError('unsupported_response_type', 'Invalid response_type');

  const scope = retrieveScope(params, config);
  if (scope.error) error = scope.error;

  const clientId = stringParam(params, 'client_id');
  const client = clientId !== undefined ? deps.credentials.byClientId(clientId) : undefined;
  let redirectUri: string | undefined;
  let redirectTarget: string | undefined;
  if (!client || !client.redirect_uris?.length) {
    error = oauthError('invalid_client', 'Invalid client authentication');
  } else {
    redirectUri = typeof params.redirect_uri === 'string' ? params.redirect_uri : client.redirect_uris[0];
    if (client.redirect_uris.includes(redirectUri)) {
      redirectTarget = redirectUri;
    } else {
      error = oauthError('invalid_request', 'Invalid redirect_uri that does not match with any redirect_uri created with the application');
      redirectTarget = client.redirect_uris[0];
    }
  }

  const pkce = retrieveCodeChallenge(params, config, client);
  if (pkce.error) error = pkce.error;

  let result: Params;
  if (error || !client || scope.error || pkce.error || redirectUri === undefined) {
    result = { ...error };
  } else if (isCode) {
    const code = await deps.tokens.saveCode({
      credential: client.id,
      binding: bindingOf(ctx, config),
      plugin: plugin.id,
      authenticated_userid: authenticatedUserid,
      scope: scope.scope,
      challenge: pkce.challenge,
      challenge_method: pkce.method,
      redirect_uri: redirectUri,
    });
    result = { code };
  } else {
    result = await issueImplicitToken(ctx, config, client, authenticatedUserid, scope.scope, deps);
  }
  if (params.state !== undefined) result.state = params.state;

  const status = error ? 400 : 200;
  if (redirectTarget === undefined) return respondNoStore(ctx, status, result);
  respondNoStore(ctx, status, { redirect_uri: composeRedirectUri(redirectTarget, result, !error && isImplicit) });
}

async function issueImplicitToken(
  ctx: RequestContext,
  config: OAuth2Config,
  client: OAuth2Credential,
  authenticatedUserid: string,
  scope: string | null,
  deps: EndpointDeps,
): Promise<Params> {
  const issued = await deps.tokens.issue({
    credential: client.id,
    binding: bindingOf(ctx, config),
    scope,
    authenticatedUserid,
    expiresIn: config.token_expiration,
    withRefreshToken: false,
    refreshTokenTtl: config.refresh_token_ttl,
  });
  return tokenResponse(issued);
}
