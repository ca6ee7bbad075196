/** Secrets: random tokens, hashed secrets and their verification, digests, constant-time comparison. */
export { alphanumericFrom, hashDeclaredSecret, isHashedSecret, randomAlphanumeric, randomToken, safeEqual, tokenDigest } from '../toolkit/secrets.ts';
export { SecretVerifier } from '../toolkit/secret-verifier.ts';
