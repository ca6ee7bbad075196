/**
 * Kong's basic-auth access (kong/plugins/basic-auth/access.lua): credentials from `Proxy-Authorization`,
 * then `Authorization`; the username names the credential, the password is checked against its hash.
 * A PBKDF2 hash is derived on the process's bounded worker pool once per credential and password, then
 * remembered (SecretVerifier), so a known caller's requests stay synchronous and cost no derivation.
 */
import {
  authenticateWith,
  challenge,
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

/** The headers of an instance's refusals, made once per configuration. */
export function prepareChallenge(config: BasicAuthConfig): Record<string, string> {
  return { 'www-authenticate': challenge('Basic', { realm: config.realm }) };
}

function refusal(challengeHeaders: Record<string, string>): AuthenticationFailure {
  return { status: 401, message: UNAUTHORIZED, headers: challengeHeaders };
}

export function createRuntime(api: PluginApi): PluginRuntime<BasicAuthConfig, Record<string, string>> {
  const credentials = api.entities<BasicCredential>(credentialEntity.name);
  const secrets = new SecretVerifier(api.store);

  /** True when `given` is the credential's password, sent from `clientIp` (a promise when a derivation is needed). */
  const passwordMatches = (credential: BasicCredential, given: string, clientIp: string): boolean | Promise<boolean> => {
    const stored = credential.password;
    if (isHashedSecret(stored)) return secrets.remembers(credential, given, clientIp) || secrets.verify(credential, stored, given, clientIp);
    return KONG_PASSWORD_HASH.test(stored) && safeEqual(kongPasswordHash(credential.consumer.id, given), stored);
  };

  const attempt = (
    ctx: AccessContext,
    config: BasicAuthConfig,
    challengeHeaders: Record<string, string>,
  ): AuthenticationOutcome | Promise<AuthenticationOutcome> => {
    const proxyHeader = findHeader(ctx, 'proxy-authorization');
    const header = findHeader(ctx, 'authorization');
    if (!proxyHeader && !header) return refusal(challengeHeaders);
    let given = proxyHeader && basicCredentials(proxyHeader.value);
    if (proxyHeader && config.hide_credentials) ctx.removeUpstreamHeader(proxyHeader.name);
    let credential = given ? credentials.find('username', given.username) : undefined;
    if (!credential) {
      given = header && basicCredentials(header.value);
      if (header && config.hide_credentials) ctx.removeUpstreamHeader(header.name);
      if (!given) return refusal(challengeHeaders);
      credential = credentials.find('username', given.username);
    }
    const consumer = credential && api.consumers.byId(credential.consumer.id);
    if (!credential || !consumer || !given) return refusal(challengeHeaders);
    const authenticated: AuthenticationOutcome = {
      consumer,
      credential: { id: credential.id, identifier: credential.username },
    };
    const matches = passwordMatches(credential, given.password, ctx.clientIp);
    if (typeof matches === 'boolean') return matches ? authenticated : refusal(challengeHeaders);
    return matches.then(
      (ok) => (ok ? authenticated : refusal(challengeHeaders)),
      (err) => {
        // Too many guesses from this address (or of this credential), or too many checks at once: refused without a derivation.
        if (!(err instanceof RequestLimitError)) throw err;
        return {
          status: err.status,
          message: err.message,
          headers: { ...refusal(challengeHeaders).headers, ...err.headers },
        };
      },
    );
  };

  return {
    access(ctx, config, plugin) {
      return authenticateWith(ctx, config, api.consumers, () => attempt(ctx, config, plugin.prepared));
    },
    beforeEntitySave: {
      // A password a write sets is stored as its PBKDF2 hash; a PATCH without one keeps the stored hash.
      [credentialEntity.name]: async (entity, { given, existing }) => (given.has('password') || !existing ? { ...entity, password: await secrets.hash(entity.password) } : entity),
    },
    async close() {
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
