/**
 * The cookie's cryptography, after lua-resty-session 4: a fresh random salt per cookie, from which and the
 * `secret` HKDF-SHA256 derives an AES-256-GCM key; the cookie's name and the audience are authenticated
 * with it, so a cookie cannot be moved to another name or audience. Not byte-compatible with Kong's
 * cookies (its header layout differs): a session started on Kong does not carry over, nor back.
 *
 * Layout, in unpadded base64url: version (1 byte) | salt (16) | iv (12) | tag (16) | ciphertext.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 1;
const SALT_BYTES = 16;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + SALT_BYTES + IV_BYTES + TAG_BYTES;
/**
 * The longest cookie value read: browsers keep 4096 bytes per cookie, name included. Longer values are
 * not decoded at all, so a client cannot make the gateway decrypt more than this.
 */
export const MAX_SEALED_LENGTH = 4096;

/** What binds a cookie to its place: the cookie's name and the session's audience. */
export interface SealContext {
  secret: string;
  cookieName: string;
  audience: string;
}

export function seal(context: SealContext, plaintext: string): string {
  const salt = randomBytes(SALT_BYTES);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyOf(context.secret, salt), iv);
  cipher.setAAD(associatedData(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), salt, iv, cipher.getAuthTag(), ciphertext]).toString('base64url');
}

/** The plaintext, or undefined for a value too long, malformed, sealed with another secret, name or audience, or altered. */
export function unseal(context: SealContext, sealed: string): string | undefined {
  if (sealed.length > MAX_SEALED_LENGTH || !/^[A-Za-z0-9_-]+$/.test(sealed)) return undefined;
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length <= HEADER_BYTES || bytes[0] !== VERSION) return undefined;
  const salt = bytes.subarray(1, 1 + SALT_BYTES);
  const iv = bytes.subarray(1 + SALT_BYTES, 1 + SALT_BYTES + IV_BYTES);
  const tag = bytes.subarray(1 + SALT_BYTES + IV_BYTES, HEADER_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(context.secret, salt), iv);
    decipher.setAAD(associatedData(context));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(bytes.subarray(HEADER_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

function keyOf(secret: string, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, salt, 'encryption', 32));
}

function associatedData({ cookieName, audience }: SealContext): Buffer {
  return Buffer.from(`${VERSION}\n${cookieName}\n${audience}`, 'utf8');
}
