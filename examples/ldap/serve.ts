/**
 * An example LDAP directory for docs/authentication.md's ldap-auth example: slapd with two users,
 * `einstein` (password `relativity`) and `curie` (`radium`), under `ou=scientists,dc=ldap,dc=tollgate,dc=test`.
 *   npm run example:ldap              (plain LDAP and StartTLS on 127.0.0.1:3389, LDAPS on 3636; or PORT, LDAPS_PORT)
 * Needs Debian's slapd (`apt-get install slapd ldap-utils`). SIGTERM or SIGINT stops it and removes its files.
 */
import { missingSlapdFiles, startDirectory } from './directory.ts';

const missing = missingSlapdFiles();
if (missing.length) {
  console.error(`example LDAP directory: slapd is not installed (missing ${missing.join(', ')}); Debian: apt-get install slapd ldap-utils`);
  process.exit(1);
}
const directory = await startDirectory({ einstein: 'relativity', curie: 'radium' }, { port: Number(process.env.PORT ?? 3389), ldapsPort: Number(process.env.LDAPS_PORT ?? 3636) });
console.log(`example LDAP directory listening on ldap://127.0.0.1:${directory.port} and ldaps://127.0.0.1:${directory.ldapsPort}`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void directory.stop().then(() => process.exit(0)));
}
