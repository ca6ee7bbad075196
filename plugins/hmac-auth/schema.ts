/**
 * Kong's hmac-auth (kong/plugins/hmac-auth/schema.lua and daos.lua): the plugin's config with Kong's
 * defaults, and the `hmacauth_credentials` entity. A secret must stay usable to compute signatures, so
 * it is kept as given, as Kong keeps it (and as jwt's HMAC secrets are kept): see docs/authentication.md.
 */
import { headerValueProblem, randomAlphanumeric, type ConsumerChild, type EntityDefinition, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const ALGORITHMS = ['hmac-sha1', 'hmac-sha256', 'hmac-sha384', 'hmac-sha512'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

export const configSchema = {
  type: 'record',
  fields: {
    hide_credentials: { type: 'boolean', required: true, default: false },
    // Seconds a request's Date (or X-Date) may be away from the gateway's clock, either way.
    clock_skew: { type: 'number', required: true, default: 300, gt: 0 },
    anonymous: { type: 'string', len_min: 1 },
    validate_request_body: { type: 'boolean', required: true, default: false },
    // Headers (or `request-line`, `@request-target`) a signature must cover.
    enforce_headers: { type: 'array', elements: { type: 'string', required: true }, required: true, default: [] },
    algorithms: { type: 'array', elements: { type: 'string', required: true, one_of: ALGORITHMS }, required: true, default: [...ALGORITHMS] },
    // Sent in WWW-Authenticate.
    realm: { type: 'string', custom: headerValueProblem },
  },
} as const satisfies RecordSchema;

export type HmacAuthConfig = Infer<typeof configSchema>;

const credentialSchema = {
  type: 'record',
  fields: {
    // Named in the Authorization header; sent upstream as X-Credential-Identifier.
    username: { type: 'string', required: true, len_min: 1, custom: headerValueProblem },
    // Kong generates one when none is given (32 random alphanumerics).
    // In gateway.yaml, `{vault://env/NAME}`: the secret is read from the environment, not kept in the file.
    secret: { type: 'string', required: true, len_min: 1, referenceable: true, default: () => randomAlphanumeric(32) },
    tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
  },
} as const satisfies RecordSchema;

export type HmacCredential = ConsumerChild<Infer<typeof credentialSchema>>;

export const credentialEntity: EntityDefinition = {
  name: 'hmacauth_credentials',
  schema: credentialSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'username',
  admin: { name: 'hmac-auths', nested: 'hmac-auth' },
  keptByCore: true,
};
