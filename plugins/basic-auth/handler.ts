/**
 * Kong's basic-auth access (kong/plugins/basic-auth/access.lua): credentials from `Proxy-Authorization`,
 * then `Authorization`; the username names the credential, the password is checked against its hash.
 * A PBKDF2 hash is derived on the process's bounded worker pool once per credential and password, then
 * remembered (SecretVerifier), so a known caller's requests stay synchronous and cost no derivation.
 */
import {
  authenticateWith,
  challenge,
  entityAdminRoutes,
  EntityDirectory,
  findHeader,
  isHashedSecret,
  RequestLimitError,
  safeEqual,
  SecretVerifier,
  type AccessContext,
  type AuthenticationFailure,
  type AuthenticationOutcome,
  type PluginApi,
  type PluginRuntime,
} from '../../src/pdk/index.ts';
import { credentialEntity, KONG_PASSWORD_HASH, kongPasswordHash, type BasicAuthConfig, type BasicCredential } from './schema.ts';

const UNAUTHORIZED = 'Unauthorized';
/** Base64 as nginx decodes it (ngx.decode_base64): its alphabet, optional padding, never one character too many. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

interface Given {
  username: string;
  password: string;
}

export async function createRuntime(api: PluginApi): Promise<PluginRuntime<BasicAuthConfig>> {
  const credentials = new EntityDirectory<BasicCredential>(api.store, credentialEntity, { parent: api.consumers, log: api.log });
  const secrets = new SecretVerifier(api.store);
  await credentials.load();
  const challenges = new WeakMap<BasicAuthConfig, Record<string, string>>();
  const refusal = (config: BasicAuthConfig): AuthenticationFailure => {
    let headers = challenges.get(config);
    if (!headers) challenges.set(config, (headers = { 'www-authenticate': challenge('Basic', { realm: config.realm }) }));
    return { status: 401, message: UNAUTHORIZED, headers };
  };

  /** True when `given` is the credential's password, sent from `clientIp` (a promise when a derivation is needed). */
  const passwordMatches = (credential: BasicCredential, given: string, clientIp: string): boolean | Promise<boolean> => {
    const stored = credential.password;
    if (isHashedSecret(stored)) return secrets.remembers(credential, given, clientIp) || secrets.verify(credential, stored, given, clientIp);
    return KONG_PASSWORD_HASH.test(stored) && safeEqual(kongPasswordHash(credential.consumer.id, given), stored);
  };

  const attempt = (ctx: AccessContext, config: BasicAuthConfig): AuthenticationOutcome | Promise<AuthenticationOutcome> => {
    const proxyHeader = findHeader(ctx, 'proxy-authorization');
    const header = findHeader(ctx, 'authorization');
    if (!proxyHeader && !header) return refusal(config);
    let given = proxyHeader && basicCredentials(proxyHeader.value);
    if (proxyHeader && config.hide_credentials) ctx.removeUpstreamHeader(proxyHeader.name);
    let credential = given ? credentials.find('username', given.username) : undefined;
    if (!credential) {
      given = header && basicCredentials(header.value);
      if (header && config.hide_credentials) ctx.removeUpstreamHeader(header.name);
      if (!given) return refusal(config);
      credential = credentials.find('username', given.username);
    }
    const consumer = credential && api.consumers.byId(credential.consumer.id);
    if (!credential || !consumer || !given) return refusal(config);
    const authenticated: AuthenticationOutcome = { consumer, credential: { id: credential.id, identifier: credential.username } };
    const matches = passwordMatches(credential, given.password, ctx.clientIp);
    if (typeof matches === 'boolean') return matches ? authenticated : refusal(config);
    return matches.then(
      (ok) => (ok ? authenticated : refusal(config)),
      (err) => {
        // Too many guesses from this address (or of this credential), or too many checks at once: refused without a derivation.
        if (!(err instanceof RequestLimitError)) throw err;
        return { status: err.status, message: err.message, headers: { ...refusal(config).headers, ...err.headers } };
      },
    );
  };

  return {
    configure(view) {
      credentials.setDeclared(view.entities(credentialEntity.name));
    },
    access(ctx, config) {
      return authenticateWith(ctx, config, api.consumers, () => attempt(ctx, config));
    },
    adminRoutes: entityAdminRoutes(credentials, {
      // A password a write sets is stored as its PBKDF2 hash; a PATCH without one keeps the stored hash.
      prepare: async (entity, { given, existing }) => (given.has('password') || !existing ? { ...entity, password: await secrets.hash(entity.password) } : entity),
    }),
    async close() {
      credentials.close();
      await secrets.close();
    },
  };
}

/** `Basic <base64 of user:password>`: the username is what precedes the first `:`, and is not empty. */
function basicCredentials(value: string): Given | undefined {
  const m = /^\s*basic\s*(.+)$/i.exec(value);
  const encoded = m?.[1].trim();
  if (!encoded || !BASE64.test(encoded) || encoded.replace(/=+$/, '').length % 4 === 1) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
