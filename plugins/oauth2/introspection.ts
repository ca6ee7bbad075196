/**
 * Beyond Kong: token introspection (RFC 7662) at `…/oauth2/introspect` and revocation (RFC 7009) at
 * `…/oauth2/revoke`, both POST over HTTPS with client authentication as at the token endpoint.
 * Confidential clients may introspect any token valid on this plugin; public clients (who prove
 * nothing but their client_id) only their own. A client revokes only its own tokens.
 */
import type { AccessContext, Params } from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { isBoundHere, retrieveClientCredentials, type EndpointDeps } from './grants.ts';
import { readParams } from './params.ts';
import { oauthError, rejectMethod, requestError, respondNoStore } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import { isExpired, type TokenRow } from './tokens.ts';
import { respondOutcome, type Failure } from './token-endpoint.ts';

type Authenticated = { client: OAuth2Credential; params: Params } | undefined;

/** Method, HTTPS, client authentication and the `token` parameter; answers the request when one fails. */
async function authenticateClient(
  ctx: AccessContext,
  config: OAuth2Config,
  deps: EndpointDeps,
  endpoint: 'introspection' | 'revocation',
): Promise<Authenticated> {
  if (ctx.method !== 'POST') {
    rejectMethod(ctx, config, endpoint);
    return undefined;
  }
  const { params, repeated } = await readParams(ctx);
  const fail = (failure: Failure): undefined => {
    respondOutcome(ctx, { failure }, params);
    return undefined;
  };
  const malformed = requestError(ctx, config, repeated);
  if (malformed) return fail(malformed);
  const { clientId, clientSecret, fromHeader } = retrieveClientCredentials(ctx, params, config);
  const client = typeof clientId === 'string' && clientId !== '' ? deps.credentials.byClientId(clientId) : undefined;
  // RFC 7662 §2.3: introspection answers bad client credentials with 401 wherever they were sent.
  const invalidClient = { ...oauthError('invalid_client', 'Invalid client authentication'), basicChallenge: fromHeader || endpoint === 'introspection' };
  if (!client) return fail(invalidClient);
  if (client.client_type === 'public') {
    if (typeof clientSecret === 'string' && clientSecret.trim() !== '') {
      return fail(oauthError('invalid_request', 'client_secret is disallowed for public clients'));
    }
  } else if (!(await deps.credentials.verifySecret(client, clientSecret, ctx.clientIp))) {
    return fail(invalidClient);
  }
  if (typeof params.token !== 'string' || params.token === '') return fail(oauthError('invalid_request', 'Missing token parameter'));
  return { client, params };
}

/** The row of an access or refresh token, looking first where `token_type_hint` points. */
async function findAnyToken(deps: EndpointDeps, token: string, hint: unknown): Promise<{ row: TokenRow; isRefresh: boolean } | undefined> {
  const asAccess = async () => {
    const row = await deps.tokens.findByAccessToken(token);
    return row && { row, isRefresh: false };
  };
  const asRefresh = async () => {
    const row = await deps.tokens.findByRefreshToken(token);
    return row && { row, isRefresh: true };
  };
  return hint === 'refresh_token' ? ((await asRefresh()) ?? (await asAccess())) : ((await asAccess()) ?? (await asRefresh()));
}

export async function introspectionEndpoint(ctx: AccessContext, config: OAuth2Config, deps: EndpointDeps): Promise<void> {
  const authenticated = await authenticateClient(ctx, config, deps, 'introspection');
  if (!authenticated) return;
  const { client, params } = authenticated;
  const found = await findAnyToken(deps, params.token as string, params.token_type_hint);
  const row = found?.row;
  const owner = row ? deps.credentials.byId(row.credential) : undefined;
  const consumer = owner ? deps.credentials.consumerOf(owner) : undefined;
  const visible = row && owner && consumer && (client.client_type === 'confidential' || owner.id === client.id);
  const usable = row && isBoundHere(row, ctx, config) && (found.isRefresh || !isExpired(row));
  if (!visible || !usable) return respondNoStore(ctx, 200, { active: false });
  const body: Params = {
    active: true,
    client_id: owner.client_id,
    token_type: found.isRefresh ? 'refresh_token' : 'bearer',
    iat: row.created_at,
  };
  if (row.scope) body.scope = row.scope;
  if (consumer.username) body.username = consumer.username;
  if (row.authenticated_userid) body.sub = row.authenticated_userid;
  if (!found.isRefresh && row.expires_in > 0) body.exp = row.created_at + row.expires_in;
  if (found.isRefresh && row.row_expires_at !== null) body.exp = Math.floor(row.row_expires_at / 1000);
  respondNoStore(ctx, 200, body);
}

export async function revocationEndpoint(ctx: AccessContext, config: OAuth2Config, deps: EndpointDeps): Promise<void> {
  const authenticated = await authenticateClient(ctx, config, deps, 'revocation');
  if (!authenticated) return;
  const { client, params } = authenticated;
  const found = await findAnyToken(deps, params.token as string, params.token_type_hint);
  // RFC 7009 §2.2: unknown tokens answer 200 too; another client's token is left alone, without an oracle.
  if (found && found.row.credential === client.id) await deps.tokens.revoke(found.row);
  respondNoStore(ctx, 200, {});
}
