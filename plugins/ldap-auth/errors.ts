/** The ldap-auth plugin's errors (listed in docs/errors.md). */

/** The directory could not be asked (unreachable, slower than `timeout`, broke off): Kong's 500, logged. */
export class LdapUnavailableError extends Error {
  override readonly name = 'LdapUnavailableError';
  readonly code = 'LDAP_AUTH_ERR_UNAVAILABLE';
}
