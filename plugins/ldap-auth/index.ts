/** Kong's `ldap-auth` plugin on Tollgate's plugin API: HTTP credentials checked by a bind against an LDAP directory. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepare, type PreparedLdap } from './handler.ts';
import { configSchema, type LdapAuthConfig } from './schema.ts';

const ldapAuth: PluginDefinition<LdapAuthConfig, PreparedLdap> = {
  name: 'ldap-auth',
  version: '0.1.0',
  priority: 1200,
  multiProcess: true,
  noConsumer: true,
  authenticates: true,
  configSchema,
  prepare,
  create: createRuntime,
};

export default ldapAuth;
