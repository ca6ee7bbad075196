/**
 * Kong's retrieve_credentials (kong/plugins/ldap-auth/access.lua): `<header_type> <base64 of user:password>`,
 * the scheme matched without regard to case after optional leading whitespace; the username is what precedes
 * the first `:` (not empty: no DN holds an empty value), the password the rest, which must not be empty (an
 * empty password would be an LDAP unauthenticated bind, which directories accept).
 */

export interface GivenCredentials {
  username: string;
  password: string;
}

/**
 * The most characters of base64 read from one header: far above any real username and password, and a
 * bound on what a client makes the gateway decode, hash and send to the directory.
 */
export const MAX_ENCODED_CREDENTIALS = 4096;

/** Base64 as nginx decodes it (ngx.decode_base64): its alphabet, optional padding. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A matcher of one `header_type`: `^\s*<scheme>\s+`, the scheme taken literally. */
export function schemePrefix(headerType: string): RegExp {
  return new RegExp(`^\\s*${headerType.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s+`, 'i');
}

/** The credentials in one header value, or undefined when it holds none in the expected form. */
export function credentialsIn(value: string, scheme: RegExp): GivenCredentials | undefined {
  const prefix = scheme.exec(value);
  if (!prefix) return undefined;
  const encoded = value.slice(prefix[0].length).trimEnd();
  if (encoded.length > MAX_ENCODED_CREDENTIALS || !BASE64.test(encoded) || encoded.replace(/=+$/, '').length % 4 === 1) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** A username as one RDN value (RFC 4514 §2.4): a name cannot step out of its attribute into another part of the DN. */
export function escapeDnValue(value: string): string {
  return value
    .replace(/[\\,+"<>;=\0]/g, (c) => (c === '\0' ? '\\00' : `\\${c}`))
    .replace(/^([ #])/, '\\$1')
    .replace(/ $/, '\\ ');
}
