/**
 * Kong's hmac-auth access (kong/plugins/hmac-auth/access.lua): a Date or X-Date within the clock skew, then
 * the `hmac` parameters of `Proxy-Authorization`, else of `Authorization`; the credential they name, the
 * signature over the headers they list, and with `validate_request_body` the body's SHA-256 `Digest`.
 * Synchronous unless the body must be read.
 */
import { createHash } from 'node:crypto';
import {
  authenticateWith,
  challenge,
  findHeader,
  type AccessContext,
  type AuthenticationFailure,
  type AuthenticationOutcome,
  type PluginApi,
  type PluginRuntime,
} from '../../src/pdk/index.ts';
import { credentialEntity, type Algorithm, type HmacAuthConfig, type HmacCredential } from './schema.ts';
import { dateWithinSkew, MAX_SIGNED_HEADERS, signatureMatches, signatureParameters, type SignatureParameters } from './signature.ts';

const NO_CREDENTIALS = 'Unauthorized';
const NO_VALID_DATE = 'HMAC signature cannot be verified, a valid date or x-date header is required for HMAC Authentication';
const SIGNATURE_NOT_VALID = 'HMAC signature cannot be verified';
const SIGNATURE_NOT_SAME = 'HMAC signature does not match';

/**
 * The largest body whose digest is checked. Kong checks only a body nginx holds in memory
 * (`client_body_buffer_size`, 8 KiB by default) and refuses a larger one as not matching; so does this
 * plugin past 1 MiB, and the body is never held whole.
 */
export const DIGEST_BODY_LIMIT = 1024 * 1024;

/** The headers of an instance's refusals, made once per configuration. */
export function prepareChallenge(config: HmacAuthConfig): Record<string, string> {
  return { 'www-authenticate': challenge('hmac', { realm: config.realm }) };
}

export function createRuntime(api: PluginApi): PluginRuntime<HmacAuthConfig, Record<string, string>> {
  const credentials = api.entities<HmacCredential>(credentialEntity.name);

  const attempt = (
    ctx: AccessContext,
    config: HmacAuthConfig,
    challengeHeaders: Record<string, string>,
  ): AuthenticationOutcome | Promise<AuthenticationOutcome> => {
    const refuse = (message: string): AuthenticationFailure => ({ status: 401, message, headers: challengeHeaders });
    const proxyHeader = findHeader(ctx, 'proxy-authorization');
    const header = findHeader(ctx, 'authorization');
    if (!proxyHeader && !header) return refuse(NO_CREDENTIALS);
    if (!dateWithinSkew(ctx, 'x-date', config.clock_skew) && !dateWithinSkew(ctx, 'date', config.clock_skew))
      return refuse(NO_VALID_DATE);
    const params = parametersHiding(ctx, config, proxyHeader?.value, header?.value);
    const algorithm = params && acceptedAlgorithm(params, config);
    const credential = algorithm && credentials.find('username', params.username);
    const consumer = credential && api.consumers.byId(credential.consumer.id);
    if (!algorithm || !credential || !consumer) return refuse(SIGNATURE_NOT_VALID);
    if (!signatureMatches(ctx, params, algorithm, credential.secret)) return refuse(SIGNATURE_NOT_SAME);
    const authenticated: AuthenticationOutcome = {
      consumer,
      credential: { id: credential.id, identifier: credential.username },
    };
    if (!config.validate_request_body) return authenticated;
    return bodyMatchesDigest(ctx).then((matches) => (matches ? authenticated : refuse(SIGNATURE_NOT_SAME)));
  };

  return {
    access(ctx, config, plugin) {
      return authenticateWith(ctx, config, api.consumers, () => attempt(ctx, config, plugin.prepared));
    },
  };
}

/**
 * The parameters of Proxy-Authorization when it names a username, else of Authorization; with
 * `hide_credentials` the header they were looked for in is kept from the upstream, as Kong does.
 */
function parametersHiding(
  ctx: AccessContext,
  config: HmacAuthConfig,
  proxyValue: string | undefined,
  value: string | undefined,
): SignatureParameters | undefined {
  const fromProxy = signatureParameters(proxyValue);
  if (fromProxy) {
    if (config.hide_credentials) ctx.removeUpstreamHeader('proxy-authorization');
    return fromProxy;
  }
  if (config.hide_credentials) ctx.removeUpstreamHeader('authorization');
  return signatureParameters(value);
}

/** Kong's validate_params: every enforced header signed, and an algorithm of the config; else undefined. */
function acceptedAlgorithm(params: SignatureParameters, config: HmacAuthConfig): Algorithm | undefined {
  if (params.headers.length > MAX_SIGNED_HEADERS) return undefined;
  if (!config.enforce_headers.every((name) => params.headers.includes(name))) return undefined;
  return config.algorithms.find((a) => a === params.algorithm);
}

/**
 * Kong's validate_body: the `Digest` header is `SHA-256=<base64 of the body's SHA-256>`; without one, the
 * body must be empty. A body past DIGEST_BODY_LIMIT matches nothing.
 */
async function bodyMatchesDigest(ctx: AccessContext): Promise<boolean> {
  const body = await ctx.readBodyWithin(DIGEST_BODY_LIMIT);
  if (!body) return false;
  const digest = findHeader(ctx, 'digest')?.value;
  if (digest === undefined) return body.length === 0;
  return digest === `SHA-256=${createHash('sha256').update(body).digest('base64')}`;
}
