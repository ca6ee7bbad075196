/**
 * Kong's jwt handler (kong/plugins/jwt/handler.lua): the token from the query (`uri_param_names`),
 * cookies (`cookie_names`) or `Bearer` headers (`header_names`), one and only one; the secret named by
 * the `key_claim_name` claim (or header field); the algorithm the secret fixes; the signature; the
 * claims to verify and the maximum expiration. Kong's messages and `WWW-Authenticate`; synchronous.
 * Refusals are Kong's `kong.response.exit` bodies: `{"message": ...}` or the claim errors, no request id.
 */
import type { KeyObject } from 'node:crypto';
import {
  authenticateWith,
  challenge,
  findHeader,
  parseArgs,
  type AccessContext,
  type AuthenticationFailure,
  type AuthenticationOutcome,
  type PluginApi,
  type PluginRuntime,
} from '../../src/pdk/index.ts';
import { isSymmetric, secretEntity, type JwtConfig, type JwtSecret } from './schema.ts';
import { base64UrlDecode, claimErrors, decodeToken, exceedsMaximumExpiration, publicKeyOf, signatureValid } from './token.ts';

const BEARER = /^\s*[Bb]earer\s+(.+)/;

/** An instance's `WWW-Authenticate` headers, made once per configuration. */
export interface Challenges {
  /** No token at all. */
  base: Record<string, string>;
  /** A token that did not pass. */
  invalid: Record<string, string>;
}

export function prepareChallenges(config: JwtConfig): Challenges {
  return {
    base: { 'www-authenticate': challenge('Bearer', { realm: config.realm }) },
    invalid: { 'www-authenticate': challenge('Bearer', { realm: config.realm, error: 'invalid_token' }) },
  };
}

export function createRuntime(api: PluginApi): PluginRuntime<JwtConfig, Challenges> {
  const secrets = api.entities<JwtSecret>(secretEntity.name);
  /** The verification key of a secret, parsed once per secret version (null: it has none). */
  const keys = new WeakMap<JwtSecret, Buffer | KeyObject | null>();

  const keyOf = (secret: JwtSecret, config: JwtConfig): Buffer | KeyObject | undefined => {
    if (isSymmetric(secret.algorithm)) {
      // Depends on the plugin's config: not cached with the secret.
      if (secret.secret === null) return undefined;
      return config.secret_is_base64 ? base64UrlDecode(secret.secret.replace(/\+/g, '-').replace(/\//g, '_')) : Buffer.from(secret.secret);
    }
    let key = keys.get(secret);
    if (key === undefined) keys.set(secret, (key = (secret.rsa_public_key && publicKeyOf(secret.rsa_public_key)) || null));
    return key ?? undefined;
  };

  const attempt = (ctx: AccessContext, config: JwtConfig, { base, invalid }: Challenges): AuthenticationOutcome => {
    const refuse = (message: string, body: object = { message }): AuthenticationFailure => ({ status: 401, message, body, headers: invalid });
    const tokens = findTokens(ctx, config);
    if (tokens.length === 0) return { status: 401, message: 'Unauthorized', body: { message: 'Unauthorized' }, headers: base };
    if (tokens.length > 1) return refuse('Multiple tokens provided');
    const token = decodeToken(tokens[0]);
    if (typeof token === 'string') return refuse(`Bad token; ${token}`);
    const claimName = config.key_claim_name;
    const named = token.claims[claimName] ?? token.header[claimName];
    if (named === undefined || named === null) return refuse(`No mandatory '${claimName}' in claims`);
    if (named === '') return refuse(`Invalid '${claimName}' in claims`);
    const secret = typeof named === 'string' || typeof named === 'number' ? secrets.find('key', String(named)) : undefined;
    const consumer = secret && api.consumers.byId(secret.consumer.id);
    if (!secret || !consumer) return refuse(`No credentials found for given '${claimName}'`);
    if (token.alg !== (secret.algorithm ?? 'HS256')) return refuse('Invalid algorithm');
    const key = keyOf(secret, config);
    if (!key) return refuse('Invalid key/secret');
    if (!signatureValid(token, key)) return refuse('Invalid signature');
    const now = Math.floor(Date.now() / 1000);
    const errors = claimErrors(token.claims, config.claims_to_verify ?? [], now);
    if (errors) return refuse('Unauthorized', errors);
    if (exceedsMaximumExpiration(token.claims, config.maximum_expiration, now)) return refuse('Unauthorized', { exp: 'exceeds maximum allowed expiration' });
    // Kong's kong.ctx.shared.authenticated_jwt_token, for plugins after this one.
    ctx.shared.authenticated_jwt_token = tokens[0];
    return { consumer, credential: { id: secret.id, identifier: secret.key } };
  };

  return {
    access(ctx, config, plugin) {
      if (!config.run_on_preflight && ctx.method === 'OPTIONS') return;
      return authenticateWith(ctx, config, api.consumers, () => attempt(ctx, config, plugin.prepared));
    },
  };
}

/** Kong's retrieve_tokens: every distinct non-empty token of the query parameters, cookies and headers. */
function findTokens(ctx: AccessContext, config: JwtConfig): string[] {
  const tokens = new Set<string>();
  if (ctx.rawQuery !== '' && config.uri_param_names.length > 0) {
    const args = parseArgs(ctx.rawQuery);
    for (const name of config.uri_param_names) {
      const value = args[name];
      for (const token of Array.isArray(value) ? value : [value]) if (typeof token === 'string' && token !== '') tokens.add(token);
    }
  }
  if (config.cookie_names.length > 0) {
    const cookies = cookiesOf(ctx);
    for (const name of config.cookie_names) {
      const value = cookies.get(name);
      if (value) tokens.add(value);
    }
  }
  for (const name of config.header_names) {
    const header = findHeader(ctx, name);
    const token = header && BEARER.exec(header.value)?.[1];
    if (token) tokens.add(token);
  }
  return [...tokens];
}

/** The request's cookies, the first of each name (nginx's `$cookie_<name>`). */
function cookiesOf(ctx: AccessContext): Map<string, string> {
  const cookies = new Map<string, string>();
  const header = ctx.headers.cookie;
  for (const pair of (Array.isArray(header) ? header.join(';') : (header ?? '')).split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    const name = pair.slice(0, eq).trim();
    if (!cookies.has(name)) cookies.set(name, pair.slice(eq + 1).trim());
  }
  return cookies;
}
