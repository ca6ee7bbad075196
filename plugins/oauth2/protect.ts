/**
 * Protecting the route (Kong's `do_authentication`): find the bearer token, check it, and tell the
 * upstream who called. Once warm, a valid token costs one digest and one in-memory cache hit.
 */
import { consumerByReference, type ConsumerDirectory, type Consumer, type RequestContext } from '../../src/pipeline/plugin-api.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { findHeader, isBoundHere, type EndpointDeps } from './grants.ts';
import { LimitError } from './errors.ts';
import { argsWithout, bodyWithout, parseArgs, readBodyParams, type Params } from './params.ts';
import { bearerChallenge, oauthError, type OAuthError } from './responses.ts';
import type { OAuth2Config } from './schema.ts';
import { tokenDigest } from './secret.ts';
import { isExpired, type TokenRow } from './tokens.ts';

/** The headers the upstream learns the caller from; client-sent copies never pass. */
const IDENTITY_HEADERS = {
  consumerId: 'x-consumer-id',
  consumerCustomId: 'x-consumer-custom-id',
  consumerUsername: 'x-consumer-username',
  credential: 'x-credential-identifier',
  anonymous: 'x-anonymous-consumer',
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

export async function protect(ctx: RequestContext, config: OAuth2Config, deps: ProtectDeps): Promise<void> {
  // Logical OR with an earlier authentication plugin: it already identified the caller.
  if (config.anonymous && ctx.credential) {
    ctx.removeUpstreamHeader(IDENTITY_HEADERS.scope);
    ctx.removeUpstreamHeader(IDENTITY_HEADERS.userid);
    return;
  }
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
      authenticate(ctx, consumer, credential, row);
      if (config.hide_credentials) await hideToken(ctx, found);
      return;
    }
    failure = INVALID;
  }
  if (config.anonymous) return authenticateAnonymous(ctx, config.anonymous, deps.consumers);
  refuse(ctx, config, failure, failure);
}

function refuse(ctx: RequestContext, config: OAuth2Config, body: OAuthError, challenge: OAuthError): void {
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
async function tokenInParams(ctx: RequestContext): Promise<FoundToken | undefined> {
  const fromQuery = ctx.rawQuery.includes('access_token') ? parseArgs(ctx.rawQuery).access_token : undefined;
  const fromBody = (await bodyParamsIfReadable(ctx)).access_token;
  const token = fromBody !== undefined ? fromBody : fromQuery;
  return typeof token === 'string' && token !== '' ? { token } : undefined;
}

/**
 * A body too large or with too many parameters holds no token here, as in Kong, which cannot read a body
 * nginx spilled to disk: it is not read into memory, and goes upstream untouched if the caller
 * authenticates otherwise.
 */
async function bodyParamsIfReadable(ctx: RequestContext): Promise<Params> {
  try {
    return await readBodyParams(ctx);
  } catch (err) {
    if (err instanceof LimitError) return {};
    throw err;
  }
}

function authenticate(ctx: RequestContext, consumer: Consumer, credential: OAuth2Credential, row: TokenRow): void {
  const scopes = row.scope ? row.scope.split(' ') : [];
  ctx.consumer = consumer;
  ctx.credential = { id: credential.id, scopes, authenticatedUserid: row.authenticated_userid };
  setConsumerHeaders(ctx, consumer);
  ctx.setUpstreamHeader(IDENTITY_HEADERS.credential, credential.client_id);
  ctx.removeUpstreamHeader(IDENTITY_HEADERS.anonymous);
  setOrRemove(ctx, IDENTITY_HEADERS.scope, scopes.length ? scopes.join(',') : null);
  setOrRemove(ctx, IDENTITY_HEADERS.userid, row.authenticated_userid);
}

function authenticateAnonymous(ctx: RequestContext, anonymous: string, consumers: ConsumerDirectory): void {
  const consumer = consumerByReference(consumers, anonymous);
  if (!consumer) return ctx.error(500, `anonymous consumer ${anonymous} is configured but doesn't exist`);
  ctx.consumer = consumer;
  setConsumerHeaders(ctx, consumer);
  ctx.setUpstreamHeader(IDENTITY_HEADERS.anonymous, 'true');
  ctx.removeUpstreamHeader(IDENTITY_HEADERS.credential);
  ctx.removeUpstreamHeader(IDENTITY_HEADERS.scope);
  ctx.removeUpstreamHeader(IDENTITY_HEADERS.userid);
}

function setConsumerHeaders(ctx: RequestContext, consumer: Consumer): void {
  ctx.setUpstreamHeader(IDENTITY_HEADERS.consumerId, consumer.id);
  setOrRemove(ctx, IDENTITY_HEADERS.consumerCustomId, consumer.custom_id);
  setOrRemove(ctx, IDENTITY_HEADERS.consumerUsername, consumer.username);
}

function setOrRemove(ctx: RequestContext, name: string, value: string | null): void {
  if (value === null || value === '') ctx.removeUpstreamHeader(name);
  else ctx.setUpstreamHeader(name, value);
}

/**
 * `hide_credentials`: the token leaves the header, or the query and the body (form, JSON or multipart:
 * each is a place a token is read from; Kong cleans only forms).
 */
async function hideToken(ctx: RequestContext, found: FoundToken): Promise<void> {
  if (found.header) return ctx.removeUpstreamHeader(found.header);
  if (ctx.rawQuery.includes('access_token')) ctx.setUpstreamQuery(argsWithout(ctx.rawQuery, 'access_token'));
  const cleaned = await bodyWithout(ctx, 'access_token');
  if (!cleaned) return;
  ctx.setUpstreamBody(cleaned.body);
  ctx.setUpstreamHeader('content-type', cleaned.contentType);
}
