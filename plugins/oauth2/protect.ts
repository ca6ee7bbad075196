/**
 * Protecting the route (Kong's `do_authentication`): find the bearer token, check it, and tell the
 * upstream who called. Once warm, a valid token costs one digest and one in-memory cache hit.
 */
import {
  authenticate,
  authenticateAnonymous,
  clearBodyParam,
  clearQueryArg,
  credentialBodyParams,
  findHeader,
  identifiedEarlier,
  parseArgs,
  tokenDigest,
  type AccessContext,
  type Consumer,
  type ConsumerDirectory,
} from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { isBoundHere, type EndpointDeps } from './grants.ts';
import { bearerChallenge, oauthError, type OAuthError } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import { isExpired, type TokenRow } from './tokens.ts';

/** What oauth2 tells the upstream besides the toolkit's identity headers; client-sent copies never pass. */
const TOKEN_HEADERS = {
  scope: 'x-authenticated-scope',
  userid: 'x-authenticated-userid',
} as const;

const MISSING = oauthError('invalid_request', 'The access token is missing');
const INVALID = oauthError('invalid_token', 'The access token is invalid or has expired');
const GLOBAL_ON_LOCAL = oauthError('invalid_token', "The access token is global, but the current plugin is configured without 'global_credentials'");

interface FoundToken {
  token: string;
  /** The header it came in, or undefined for the query/body. */
  header?: string;
}

export interface ProtectDeps extends EndpointDeps {
  consumers: ConsumerDirectory;
}

export async function protect(ctx: AccessContext, config: OAuth2Config, deps: ProtectDeps): Promise<void> {
  // Logical OR with an earlier authentication plugin: it already identified the caller.
  if (identifiedEarlier(ctx, config)) return clearTokenHeaders(ctx);
  const header = findHeader(ctx, config.auth_header_name);
  const found = header ? tokenInHeader(header) : await tokenInParams(ctx);
  let failure: OAuthError = MISSING;
  if (found) {
    // A warm token is answered from the cache without waiting on anything.
    const digest = tokenDigest(found.token);
    const row = deps.tokens.cached(digest) ?? (await deps.tokens.findByDigest(digest));
    const credential = row ? deps.credentials.byId(row.credential) : undefined;
    const consumer = credential ? deps.credentials.consumerOf(credential) : undefined;
    if (row && row.binding === null && !config.global_credentials) {
      // Kong answers this one directly, even with `anonymous` set.
      return refuse(ctx, config, GLOBAL_ON_LOCAL, INVALID);
    }
    if (row && credential && consumer && !isExpired(row) && isBoundHere(row, ctx, config)) {
      authenticateToken(ctx, consumer, credential, row);
      if (config.hide_credentials) await hideToken(ctx, found);
      return;
    }
    failure = INVALID;
  }
  if (!config.anonymous) return refuse(ctx, config, failure, failure);
  authenticateAnonymous(ctx, config.anonymous, deps.consumers);
  clearTokenHeaders(ctx);
}

function refuse(ctx: AccessContext, config: OAuth2Config, body: OAuthError, challenge: OAuthError): void {
  // A gRPC client gets UNAUTHENTICATED with the error_description as grpc-message.
  ctx.respond(401, body, { 'www-authenticate': bearerChallenge(config, challenge === MISSING ? undefined : challenge) });
}

/**
 * Kong's `parse_access_token`: a header that is present decides alone. `Bearer <t>`/`Token <t>` give `<t>`;
 * any other value is taken whole; an empty one is a missing token.
 */
function tokenInHeader(header: { name: string; value: string }): FoundToken | undefined {
  if (header.value === '') return undefined;
  const parts = header.value.trim().split(/\s+/);
  const isScheme = parts.length === 2 && /^(bearer|token)$/i.test(parts[0]);
  return { token: isScheme ? parts[1] : header.value, header: header.name };
}

/** Without the header: `access_token` from the body (POST/PUT/PATCH forms, JSON, multipart), else the query. */
async function tokenInParams(ctx: AccessContext): Promise<FoundToken | undefined> {
  const fromQuery = ctx.rawQuery.includes('access_token') ? parseArgs(ctx.rawQuery).access_token : undefined;
  const fromBody = (await credentialBodyParams(ctx)).access_token;
  const token = fromBody !== undefined ? fromBody : fromQuery;
  return typeof token === 'string' && token !== '' ? { token } : undefined;
}

function authenticateToken(ctx: AccessContext, consumer: Consumer, credential: OAuth2Credential, row: TokenRow): void {
  const scopes = row.scope ? row.scope.split(' ') : [];
  authenticate(ctx, consumer, { id: credential.id, identifier: credential.client_id, scopes, authenticatedUserid: row.authenticated_userid });
  setOrRemove(ctx, TOKEN_HEADERS.scope, scopes.length ? scopes.join(',') : null);
  setOrRemove(ctx, TOKEN_HEADERS.userid, row.authenticated_userid);
}

/** Kong clears them when another plugin (or the anonymous consumer) stands for the caller. */
function clearTokenHeaders(ctx: AccessContext): void {
  ctx.removeUpstreamHeader(TOKEN_HEADERS.scope);
  ctx.removeUpstreamHeader(TOKEN_HEADERS.userid);
}

function setOrRemove(ctx: AccessContext, name: string, value: string | null): void {
  if (value === null || value === '') ctx.removeUpstreamHeader(name);
  else ctx.setUpstreamHeader(name, value);
}

/**
 * `hide_credentials`: the token leaves the header, or the query and the body (form, JSON or multipart:
 * each is a place a token is read from; Kong cleans only forms).
 */
async function hideToken(ctx: AccessContext, found: FoundToken): Promise<void> {
  if (found.header) return ctx.removeUpstreamHeader(found.header);
  clearQueryArg(ctx, 'access_token');
  await clearBodyParam(ctx, 'access_token');
}
