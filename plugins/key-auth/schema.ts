/**
 * Kong's key-auth (kong/plugins/key-auth/schema.lua and daos.lua): the plugin's config with Kong's
 * defaults, and the `keyauth_credentials` entity, whose keys are kept only as their digests.
 */
import { HEADER_NAME, headerValueProblem, randomAlphanumeric, type ConsumerChild, type EntityDefinition, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    key_names: { type: 'array', elements: HEADER_NAME, required: true, default: ['apikey'] },
    hide_credentials: { type: 'boolean', required: true, default: false },
    anonymous: { type: 'string', len_min: 1 },
    key_in_header: { type: 'boolean', required: true, default: true },
    key_in_query: { type: 'boolean', required: true, default: true },
    key_in_body: { type: 'boolean', required: true, default: false },
    run_on_preflight: { type: 'boolean', required: true, default: true },
    // Sent in WWW-Authenticate.
    realm: { type: 'string', custom: headerValueProblem },
  },
} as const satisfies RecordSchema;

export type KeyAuthConfig = Infer<typeof configSchema>;

const credentialSchema = {
  type: 'record',
  fields: {
    // Kong generates 32 random alphanumerics when none is given. Stored: the key's digest, never the key itself.
    key: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32) },
    tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
  },
} as const satisfies RecordSchema;

export type KeyCredential = ConsumerChild<Infer<typeof credentialSchema>>;

export const credentialEntity: EntityDefinition = {
  name: 'keyauth_credentials',
  schema: credentialSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'key',
  digested: ['key'],
  ttl: true,
  admin: { name: 'key-auths', nested: 'key-auth' },
  keptByCore: true,
};
