/**
 * Kong's key-auth (kong/plugins/key-auth/schema.lua and daos.lua): the plugin's config with Kong's
 * defaults, and the `keyauth_credentials` entity, whose keys are kept only as their digests.
 */
import { HEADER_NAME, headerValueProblem, randomAlphanumeric, type EntityDefinition, type RecordSchema } from '../../src/pdk/index.ts';

export interface KeyAuthConfig {
  key_names: string[];
  hide_credentials: boolean;
  anonymous: string | null;
  key_in_header: boolean;
  key_in_query: boolean;
  key_in_body: boolean;
  run_on_preflight: boolean;
  realm: string | null;
}

export const configSchema: RecordSchema = {
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
};

export interface KeyCredential {
  id: string;
  created_at: number;
  consumer: { id: string };
  /** The key's digest: the key itself is never kept. */
  key: string;
  tags: string[] | null;
}

export const credentialEntity: EntityDefinition = {
  name: 'keyauth_credentials',
  schema: {
    type: 'record',
    fields: {
      // Kong generates 32 random alphanumerics when none is given.
      key: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32) },
      tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
    },
  },
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'key',
  digested: ['key'],
  ttl: true,
  admin: { name: 'key-auths', nested: 'key-auth' },
};
