/**
 * Kong's jwt_parser.lua: a JWT split into its three parts, decoded, its signature checked with node:crypto
 * (HMAC compared in constant time; RSA PKCS#1 v1.5 and PSS, ECDSA with raw R||S signatures, EdDSA), and
 * its registered claims checked (RFC 7519 §4.1.4, §4.1.5).
 */
import { createHmac, createPublicKey, constants, timingSafeEqual, verify, type KeyObject } from 'node:crypto';
import { parseUntrustedJson } from '../../src/pdk/index.ts';
import type { Algorithm } from './schema.ts';

export interface DecodedToken {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  /** `header.claims`, the signed input. */
  signingInput: string;
  signature: Buffer;
  alg: Algorithm;
}

const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;
const DIGESTS: Record<string, string> = { '256': 'sha256', '384': 'sha384', '512': 'sha512' };
/** RFC 7518 §3.4: an ECDSA signature is R and S, each as long as the curve's order. */
const ECDSA_SIGNATURE_LENGTHS: Partial<Record<Algorithm, number>> = { ES256: 64, ES384: 96, ES512: 132 };
const SUPPORTED = new Set<string>(['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'EdDSA']);

/** Base64url as Kong decodes it (padding added, url alphabet only); undefined when it is not. */
export function base64UrlDecode(input: string): Buffer | undefined {
  return BASE64URL.test(input) && input.replace(/=+$/, '').length % 4 !== 1 ? Buffer.from(input, 'base64url') : undefined;
}

function jsonObject(part: string): Record<string, unknown> | undefined {
  const bytes = base64UrlDecode(part);
  if (!bytes) return undefined;
  try {
    const value = parseUntrustedJson(bytes.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The token, or Kong's reason why it cannot be one (`invalid JSON`, `invalid alg`, `invalid signature`). */
export function decodeToken(token: string): DecodedToken | string {
  const first = token.indexOf('.');
  const second = first < 0 ? -1 : token.indexOf('.', first + 1);
  if (second < 0) return 'invalid JSON';
  const headerPart = token.slice(0, first);
  const claimsPart = token.slice(first + 1, second);
  const header = jsonObject(headerPart);
  const claims = jsonObject(claimsPart);
  if (!header || !claims) return 'invalid JSON';
  if (typeof header.alg !== 'string' || !SUPPORTED.has(header.alg)) return 'invalid alg';
  const signature = base64UrlDecode(token.slice(second + 1));
  if (!signature) return 'invalid signature';
  return { header, claims, signingInput: `${headerPart}.${claimsPart}`, signature, alg: header.alg as Algorithm };
}

/** True when the token's signature is the algorithm's over its input, with `key` (an HMAC secret or a public key). */
export function signatureValid(token: DecodedToken, key: Buffer | KeyObject): boolean {
  const { alg, signingInput, signature } = token;
  const digest = DIGESTS[alg.slice(2)];
  if (alg.startsWith('HS')) {
    const expected = createHmac(digest, key as Buffer).update(signingInput).digest();
    return expected.length === signature.length && timingSafeEqual(expected, signature);
  }
  const data = Buffer.from(signingInput);
  try {
    if (alg === 'EdDSA') return verify(null, data, key as KeyObject, signature);
    if (alg.startsWith('ES')) {
      if (signature.length !== ECDSA_SIGNATURE_LENGTHS[alg]) return false;
      return verify(digest, data, { key: key as KeyObject, dsaEncoding: 'ieee-p1363' }, signature);
    }
    if (alg.startsWith('PS')) return verify(digest, data, { key: key as KeyObject, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO }, signature);
    return verify(digest, data, key as KeyObject, signature);
  } catch {
    // A key of another type than the algorithm's.
    return false;
  }
}

/** A PEM public key (or a private one, whose public half is taken), or undefined when it does not parse. */
export function publicKeyOf(pem: string): KeyObject | undefined {
  try {
    return createPublicKey(pem);
  } catch {
    return undefined;
  }
}

/** Kong's verify_registered_claims: per claim, `must be a number`, `token expired`, `token not valid yet`. */
export function claimErrors(claims: Record<string, unknown>, toVerify: readonly string[], now: number): Record<string, string> | undefined {
  let errors: Record<string, string> | undefined;
  for (const name of toVerify) {
    const value = claims[name];
    let error: string | undefined;
    if (typeof value !== 'number') error = 'must be a number';
    else if (name === 'exp' && value <= now) error = 'token expired';
    else if (name === 'nbf' && value > now) error = 'token not valid yet';
    if (error) (errors ??= {})[name] = error;
  }
  return errors;
}

/** Kong's check_maximum_expiration: `exp` present and at most `maximum` seconds ahead. */
export function exceedsMaximumExpiration(claims: Record<string, unknown>, maximum: number, now: number): boolean {
  const exp = claims.exp;
  return maximum > 0 && (typeof exp !== 'number' || exp - now > maximum);
}
