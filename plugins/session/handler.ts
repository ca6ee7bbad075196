/**
 * Kong's session plugin (kong/plugins/session/access.lua, header_filter.lua): a caller another
 * authentication plugin identified gets an encrypted session cookie in the answer (its consumer, credential
 * and authenticated groups); later requests carrying the cookie are authenticated by it, before any other
 * authentication plugin runs (priority 1900), which then let the caller pass when they allow `anonymous`.
 * A logout request (a method of `logout_methods` with `logout_query_arg`, or `logout_post_arg` in the
 * body with `read_body_for_logout`) ends the session: 200, and the cookies cleared.
 */
import { randomBytes } from 'node:crypto';
import {
  authenticate,
  putIfAbsent,
  readBodyParams,
  type AccessContext,
  type Consumer,
  type PluginApi,
  type PluginRuntime,
  type RequestView,
} from '../../src/pdk/index.ts';
import { clearCookie, cookieValue, setCookie } from './cookies.ts';
import { refreshOf, remaining, rememberTimeouts, sessionTimeouts, type Remaining } from './lifetime.ts';
import type { SealContext } from './sealed-cookie.ts';
import type { SessionConfig, SessionHeader } from './schema.ts';
import { cookieStorage, newSessionId, revocableStorage, sealRecord, type SessionRecord, type SessionStorage } from './storage.ts';

/** Where access leaves the session it opened for the response phase (Kong's kong.ctx.shared.authenticated_session). */
const OPENED = 'session_plugin_opened';
const GENERATED_SECRET_KEY = 'generated-secret';
const GROUPS_HEADER = 'x-authenticated-groups';
const BODY_LOGOUT_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

interface Opened {
  record?: SessionRecord;
  /** Set-Cookie values the answer carries: a refreshed session, or cleared cookies. */
  cookies: string[];
}

export function createRuntime(api: PluginApi): PluginRuntime<SessionConfig> {
  const revocable = revocableStorage(api.store);
  let generatedSecret: string | undefined;

  const storageOf = (config: SessionConfig): SessionStorage => (config.storage === 'kong' ? revocable : cookieStorage);
  const contextOf = (config: SessionConfig, cookieName: string): SealContext => ({
    secret: config.secret ?? generatedSecret!,
    cookieName,
    audience: config.audience,
  });

  /** The session a request's cookies hold, and whether it came from the persistent cookie only. */
  const open = async (ctx: RequestView, config: SessionConfig): Promise<{ record: SessionRecord; persistent: boolean } | undefined> => {
    const now = nowSeconds();
    const fromCookie = async (name: string) => {
      const value = cookieValue(ctx.headers.cookie, name);
      return value === undefined ? undefined : storageOf(config).load(contextOf(config, name), value);
    };
    const record = await fromCookie(config.cookie_name);
    if (record && remaining(record, sessionTimeouts(config), now).timeout > 0) return { record, persistent: false };
    if (!config.remember) return undefined;
    const remembered = await fromCookie(config.remember_cookie_name);
    return remembered && remaining(remembered, rememberTimeouts(config), now).timeout > 0 ? { record: remembered, persistent: true } : undefined;
  };

  /** The Set-Cookie values that carry `record`: the session cookie, and the persistent one with `remember`. */
  const cookiesFor = (config: SessionConfig, record: SessionRecord): string[] => {
    const cookies = [setCookie(config, config.cookie_name, sealRecord(contextOf(config, config.cookie_name), record))];
    if (config.remember) {
      const left = remaining(record, rememberTimeouts(config), nowSeconds()).timeout;
      const sealed = sealRecord(contextOf(config, config.remember_cookie_name), record);
      cookies.push(setCookie(config, config.remember_cookie_name, sealed, Number.isFinite(left) ? left : undefined));
    }
    return cookies;
  };

  const clearedCookies = (config: SessionConfig): string[] =>
    [config.cookie_name, ...(config.remember ? [config.remember_cookie_name] : [])].map((name) => clearCookie(config, name));

  /** Revokes the session where the storage can; it could have lived until the later of its absolute timeouts. */
  const revoke = (config: SessionConfig, record: SessionRecord): Promise<void> => {
    const now = nowSeconds();
    const lives = [remaining(record, sessionTimeouts(config), now).absolute, config.remember ? remaining(record, rememberTimeouts(config), now).absolute : 0];
    return storageOf(config).revoke(record, Math.max(...lives));
  };

  return {
    async configure(view) {
      // Kong generates a random default secret; one shared through the store serves every process and node alike.
      if (generatedSecret || view.instances.every((instance) => instance.config.secret)) return;
      await putIfAbsent(api.store, GENERATED_SECRET_KEY, randomBytes(32).toString('base64url'));
      generatedSecret = await api.store.get(GENERATED_SECRET_KEY);
    },

    async access(ctx, config) {
      const opened = await open(ctx, config);
      if (!opened) return;
      if (await isLogout(ctx, config)) {
        await revoke(config, opened.record);
        return ctx.respond(200, undefined, { 'set-cookie': clearedCookies(config) });
      }
      const consumer = (await api.consumers.currentById(opened.record.consumerId)) as Consumer | undefined;
      if (!consumer) {
        // Its consumer is gone: the session ends with it.
        await revoke(config, opened.record);
        ctx.shared[OPENED] = { cookies: clearedCookies(config) } satisfies Opened;
        return;
      }
      const record = refreshed(config, opened.record, opened.persistent);
      ctx.shared[OPENED] = { record, cookies: record === opened.record ? [] : cookiesFor(config, record) } satisfies Opened;
      setSessionHeaders(config.request_headers, record, config, (name, value) => ctx.setUpstreamHeader(name, value));
      authenticateBySession(ctx, consumer, record);
    },

    response(ctx, config, response) {
      const opened = ctx.shared[OPENED] as Opened | undefined;
      let record = opened?.record;
      const cookies = [...(opened?.cookies ?? [])];
      const { consumer, credential } = ctx;
      // A caller another plugin identified now, or anew: a session of its own. Anonymous callers get none.
      if (consumer && credential && !(record?.credentialId === credential.id && record.consumerId === consumer.id)) {
        record = newRecord(ctx, consumer, credential.id);
        cookies.push(...cookiesFor(config, record));
      }
      if (record) setSessionHeaders(config.response_headers, record, config, (name, value) => (response.headers[name] = value));
      if (cookies.length) response.headers['set-cookie'] = [...setCookiesOf(response.headers['set-cookie']), ...cookies];
    },
  };
}

/** Whether the request asks to end its session (Kong's session.logout). */
async function isLogout(ctx: AccessContext, config: SessionConfig): Promise<boolean> {
  if (!config.logout_methods.includes(ctx.method as never)) return false;
  if (config.logout_query_arg && ctx.query.has(config.logout_query_arg)) return true;
  if (!config.read_body_for_logout || !config.logout_post_arg || !BODY_LOGOUT_METHODS.has(ctx.method)) return false;
  const value = (await readBodyParams(ctx, { anyMethod: true }))[config.logout_post_arg];
  return value !== undefined && value !== null && value !== false;
}

/** The record after this request: renewed, touched, or as it was (no Set-Cookie then). A session reopened from the persistent cookie is renewed. */
function refreshed(config: SessionConfig, record: SessionRecord, persistent: boolean): SessionRecord {
  const now = nowSeconds();
  const refresh = persistent ? 'renew' : refreshOf(record, sessionTimeouts(config), now);
  if (refresh === 'renew') return { ...record, renewedAt: now, touchedAt: now };
  if (refresh === 'touch') return { ...record, touchedAt: now };
  return record;
}

/** Kong's access.lua authenticate(): the consumer, the credential by id, and the groups the session vouches for. */
function authenticateBySession(ctx: AccessContext, consumer: Consumer, record: SessionRecord): void {
  authenticate(ctx, consumer, { id: record.credentialId, identifier: record.credentialId });
  if (record.groups) {
    ctx.setUpstreamHeader(GROUPS_HEADER, record.groups.join(', '));
    ctx.shared.authenticated_groups = record.groups;
  } else {
    ctx.removeUpstreamHeader(GROUPS_HEADER);
  }
}

function newRecord(ctx: RequestView, consumer: Consumer, credentialId: string): SessionRecord {
  const now = nowSeconds();
  const groups = ctx.shared.authenticated_groups;
  return {
    id: newSessionId(),
    consumerId: consumer.id,
    credentialId,
    groups: Array.isArray(groups) && groups.every((g) => typeof g === 'string') ? groups : null,
    subject: consumer.username ?? consumer.custom_id ?? consumer.id,
    createdAt: now,
    renewedAt: now,
    touchedAt: now,
  };
}

/** lua-resty-session's Session-* headers: those `wanted` names, the timeouts as whole seconds left (none when off). */
function setSessionHeaders(
  wanted: readonly SessionHeader[] | null | undefined,
  record: SessionRecord,
  config: SessionConfig,
  set: (name: string, value: string) => void,
): void {
  if (!wanted?.length) return;
  const left: Remaining = remaining(record, sessionTimeouts(config), nowSeconds());
  const values: Record<SessionHeader, string | number | null> = {
    id: record.id,
    audience: config.audience,
    subject: record.subject,
    timeout: left.timeout,
    'idling-timeout': left.idling,
    'rolling-timeout': left.rolling,
    'absolute-timeout': left.absolute,
  };
  for (const name of wanted) {
    const value = values[name];
    if (value === null || value === Infinity) continue;
    set(`session-${name}`, typeof value === 'number' ? String(Math.floor(value)) : value);
  }
}

function setCookiesOf(header: number | string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return Array.isArray(header) ? header : [String(header)];
}

function nowSeconds(): number {
  return Date.now() / 1000;
}
