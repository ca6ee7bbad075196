/**
 * Kong's ldap-auth config (kong/plugins/ldap-auth/schema.lua): the directory to bind against, how the
 * credentials come, how long a bind's verdict is remembered; ldaps and start_tls exclude each other.
 */
import { describedAs, headerValueProblem, hostProblem, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

const BOTH_TLS_MODES = "'ldaps' and 'start_tls' cannot be enabled simultaneously";

export const configSchema = {
  type: 'record',
  fields: {
    ldap_host: { type: 'string', required: true, len_min: 1, custom: hostProblem },
    ldap_port: { type: 'integer', required: true, default: 389, between: [0, 65535] },
    ldaps: { type: 'boolean', required: true, default: false },
    start_tls: { type: 'boolean', required: true, default: false },
    /** Verify the directory's certificate (against Node's CA store and NODE_EXTRA_CA_CERTS) and its name. */
    verify_ldap_host: { type: 'boolean', required: true, default: false },
    base_dn: { type: 'string', required: true, len_min: 1 },
    /** The attribute naming a user in its DN: the bind DN is `<attribute>=<username>,<base_dn>`. */
    attribute: { type: 'string', required: true, len_min: 1 },
    /** Seconds a bind's verdict (accepted or refused) is remembered; 0 remembers it for as long as the process lives, as Kong's cache. */
    cache_ttl: { type: 'number', required: true, default: 60, between: [0, 100_000_000] },
    hide_credentials: { type: 'boolean', required: true, default: false },
    /** Milliseconds for the whole exchange with the directory: connect, StartTLS or TLS handshake, bind. */
    timeout: { type: 'number', default: 10_000, between: [1, 3_600_000] },
    /** Milliseconds an idle connection to the directory is kept for the next bind. */
    keepalive: { type: 'number', default: 60_000, between: [0, 3_600_000] },
    anonymous: { type: 'string', len_min: 1 },
    /** The scheme of the Authorization value and of WWW-Authenticate (`ldap` is sent as `LDAP`, as Kong). */
    header_type: { type: 'string', default: 'ldap', len_min: 1, custom: headerValueProblem },
    realm: { type: 'string', custom: headerValueProblem },
  },
  entity_checks: [
    describedAs([{ conditional: { if_field: 'ldaps', if_match: { eq: true }, then_field: 'start_tls', then_match: { eq: false } } }], (config) =>
      config.ldaps && config.start_tls ? [{ path: [], message: BOTH_TLS_MODES }] : [],
    ),
  ],
} as const satisfies RecordSchema;

export type LdapAuthConfig = Infer<typeof configSchema>;
