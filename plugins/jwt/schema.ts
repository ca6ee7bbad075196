/**
 * Kong's jwt (kong/plugins/jwt/schema.lua and daos.lua): the plugin's config with Kong's defaults and
 * entity check, and the `jwt_secrets` entity. An HMAC secret must be kept as it is to check signatures;
 * public keys are checked when written.
 */
import { createPublicKey } from 'node:crypto';
import { describedAs, headerValueProblem, randomAlphanumeric, type ConsumerChild, type EntityDefinition, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

/**
 * Kong's conditional entity check: with a maximum expiration, a list of claims to verify must hold `exp`.
 * A null list passes, as in Kong (its conditional checks leave null alone): the maximum still refuses
 * tokens without an `exp` (handler).
 */
function maximumExpirationNeedsExp(config: Record<string, any>): Issue[] {
  if (config.maximum_expiration > 0 && Array.isArray(config.claims_to_verify) && !config.claims_to_verify.includes('exp')) {
    return [{ path: ['claims_to_verify'], message: 'expected to contain: exp' }];
  }
  return [];
}

export const configSchema = {
  type: 'record',
  fields: {
    uri_param_names: { type: 'set', elements: { type: 'string', len_min: 1 }, default: ['jwt'] },
    cookie_names: { type: 'set', elements: { type: 'string', len_min: 1 }, default: [] },
    key_claim_name: { type: 'string', len_min: 1, default: 'iss' },
    secret_is_base64: { type: 'boolean', required: true, default: false },
    claims_to_verify: { type: 'set', elements: { type: 'string', one_of: ['exp', 'nbf'] } },
    anonymous: { type: 'string', len_min: 1 },
    run_on_preflight: { type: 'boolean', required: true, default: true },
    maximum_expiration: { type: 'number', default: 0, between: [0, 31_536_000] },
    header_names: { type: 'set', elements: { type: 'string', len_min: 1 }, default: ['authorization'] },
    // Sent in WWW-Authenticate.
    realm: { type: 'string', custom: headerValueProblem },
  },
  entity_checks: [
    describedAs(
      [{ conditional: { if_field: 'maximum_expiration', if_match: { gt: 0 }, then_field: 'claims_to_verify', then_match: { contains: 'exp' } } }],
      maximumExpirationNeedsExp,
    ),
  ],
} as const satisfies RecordSchema;

export type JwtConfig = Infer<typeof configSchema>;

export const ALGORITHMS = ['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'EdDSA'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

export function isSymmetric(algorithm: Algorithm): boolean {
  return algorithm.startsWith('HS');
}

/**
 * Kong's conditional check, for every algorithm with a public key (Kong lists RS, PS and EdDSA; an ES
 * secret without a key could never verify a token either): a key is required, and must parse.
 */
function publicKeyNeeded(secret: Record<string, any>): Issue[] {
  if (isSymmetric(secret.algorithm)) return [];
  if (typeof secret.rsa_public_key !== 'string') return [{ path: ['rsa_public_key'], message: 'required field missing' }];
  try {
    createPublicKey(secret.rsa_public_key);
    return [];
  } catch {
    return [{ path: ['rsa_public_key'], message: 'invalid key' }];
  }
}

const secretSchema = {
  type: 'record',
  fields: {
    // Sent upstream as X-Credential-Identifier.
    key: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32), custom: headerValueProblem },
    secret: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32) },
    rsa_public_key: { type: 'string', len_min: 1 },
    algorithm: { type: 'string', one_of: ALGORITHMS, default: 'HS256' },
    tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
  },
  entity_checks: [publicKeyNeeded],
} as const satisfies RecordSchema;

export type JwtSecret = ConsumerChild<Infer<typeof secretSchema>>;

export const secretEntity: EntityDefinition = {
  name: 'jwt_secrets',
  schema: secretSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'key',
  admin: { name: 'jwts', nested: 'jwt' },
  keptByCore: true,
};
