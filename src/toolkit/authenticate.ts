/**
 * What every authentication plugin does once it has checked a credential, as Kong's do (the
 * `set_consumer` of kong/plugins/key-auth/handler.lua and its siblings, `kong.client.authenticate`):
 * the request's consumer and credential, the identity headers the upstream reads, the `anonymous`
 * fallback, and the "logical OR" between several authentication plugins on one route.
 */
import type { Consumer } from '../config/types.ts';
import { consumerByReference } from '../consumers.ts';
import type { AccessContext, AuthenticatedCredential, ConsumerDirectory, RequestView } from '../pdk/types.ts';

/** Kong's HEADERS (kong/constants.lua). Client-sent copies never reach the upstream (the proxy drops them). */
export const IDENTITY_HEADERS = {
  consumerId: 'x-consumer-id',
  consumerCustomId: 'x-consumer-custom-id',
  consumerUsername: 'x-consumer-username',
  credential: 'x-credential-identifier',
  anonymous: 'x-anonymous-consumer',
} as const;

/** The plugin config fields the flow reads. */
export interface AuthenticationConfig {
  /** A consumer id or username to continue as when authentication fails (Kong's `anonymous`). */
  anonymous?: string | null;
}

/**
 * The request's caller is `consumer`, authenticated by `credential` (null for the anonymous consumer):
 * sets `ctx.consumer`, `ctx.credential` and the identity headers. A credential without a consumer (Kong's
 * ldap-auth, whose directory's users are no consumers) removes the consumer headers.
 */
export function authenticate(ctx: AccessContext, consumer: Consumer | null, credential: AuthenticatedCredential | null): void {
  ctx.consumer = consumer;
  ctx.credential = credential;
  setOrRemove(ctx, IDENTITY_HEADERS.consumerId, consumer?.id ?? null);
  setOrRemove(ctx, IDENTITY_HEADERS.consumerCustomId, consumer?.custom_id ?? null);
  setOrRemove(ctx, IDENTITY_HEADERS.consumerUsername, consumer?.username ?? null);
  setOrRemove(ctx, IDENTITY_HEADERS.credential, credential?.identifier ?? null);
  if (credential) ctx.removeUpstreamHeader(IDENTITY_HEADERS.anonymous);
  else ctx.setUpstreamHeader(IDENTITY_HEADERS.anonymous, 'true');
}

/**
 * Kong's "logical OR": with `anonymous` set, a caller an earlier authentication plugin identified passes
 * this one unchecked. (Without `anonymous` every plugin must succeed: "logical AND".)
 */
export function identifiedEarlier(ctx: RequestView, config: AuthenticationConfig): boolean {
  return Boolean(config.anonymous) && ctx.credential !== null;
}

/**
 * Continues as the `anonymous` consumer (by id or username, Kong's rule), or answers 500 when it does not
 * exist, with Kong's message: a configuration error the operator must see, never a silent pass.
 */
export function authenticateAnonymous(ctx: AccessContext, anonymous: string, consumers: ConsumerDirectory): void {
  const consumer = consumerByReference(consumers, anonymous);
  if (!consumer) return ctx.error(500, `anonymous consumer ${anonymous} is configured but doesn't exist`);
  authenticate(ctx, consumer, null);
}

/** Why a request did not authenticate: the answer when there is no `anonymous` to fall back on. */
export interface AuthenticationFailure {
  status: number;
  /** Kong's `{"message": ...}` unless `body` says otherwise. */
  message: string;
  body?: object;
  headers?: Record<string, string>;
}

/** A checked credential and its consumer (none for a credential that is not a consumer's). */
export interface Authenticated {
  consumer: Consumer | null;
  credential: AuthenticatedCredential;
}

export type AuthenticationOutcome = Authenticated | AuthenticationFailure;

/**
 * Kong's access phase of an authentication plugin: skip when an earlier plugin identified the caller and
 * `anonymous` is set; otherwise `attempt`, then authenticate, fall back on `anonymous`, or answer the
 * failure. Stays synchronous when `attempt` is (a cached credential costs no promise).
 */
export function authenticateWith(
  ctx: AccessContext,
  config: AuthenticationConfig,
  consumers: ConsumerDirectory,
  attempt: () => AuthenticationOutcome | Promise<AuthenticationOutcome>,
): void | Promise<void> {
  if (identifiedEarlier(ctx, config)) return;
  const outcome = attempt();
  if (outcome instanceof Promise) return outcome.then((settled) => conclude(ctx, config, consumers, settled));
  conclude(ctx, config, consumers, outcome);
}

function conclude(ctx: AccessContext, config: AuthenticationConfig, consumers: ConsumerDirectory, outcome: AuthenticationOutcome): void {
  if ('consumer' in outcome) return authenticate(ctx, outcome.consumer, outcome.credential);
  if (config.anonymous) return authenticateAnonymous(ctx, config.anonymous, consumers);
  if (outcome.body) ctx.respond(outcome.status, outcome.body, outcome.headers);
  else ctx.error(outcome.status, outcome.message, outcome.headers);
}

/** A WWW-Authenticate challenge: `Scheme name="value", ...`, values quoted as RFC 9110 §5.6.4 says; unset ones left out. */
export function challenge(scheme: string, params: Record<string, string | null | undefined> = {}): string {
  const parts = Object.entries(params)
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([name, value]) => `${name}="${value!.replace(/["\\]/g, '\\$&')}"`);
  return parts.length ? `${scheme} ${parts.join(', ')}` : scheme;
}

function setOrRemove(ctx: AccessContext, name: string, value: string | null): void {
  if (value === null || value === '') ctx.removeUpstreamHeader(name);
  else ctx.setUpstreamHeader(name, value);
}
