/**
 * Kong's `certificates`, `snis` and `ca_certificates` (kong/db/schema/entities/certificates.lua,
 * snis.lua, ca_certificates.lua), with their checks on the PEM material: the key matches the
 * certificate, an alternative pair uses another key type, a CA certificate is one unexpired CA.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { validateSni } from './hostnames.ts';
import { ENTITY_KEYS, TAGS } from './entities.ts';
import { describedAs, type Issue, type RecordSchema } from './schema.ts';

const PEM_CERTIFICATE = '-----BEGIN CERTIFICATE-----';

function parseCertificate(pem: string): X509Certificate | string {
  try {
    return new X509Certificate(pem);
  } catch (err) {
    return `invalid certificate: ${(err as Error).message}`;
  }
}

function parseKey(pem: string): KeyObject | string {
  try {
    return createPrivateKey(pem);
  } catch (err) {
    return `invalid key: ${(err as Error).message}`;
  }
}

const checkCertificate = (pem: string) => {
  const parsed = parseCertificate(pem);
  return typeof parsed === 'string' ? parsed : undefined;
};
const checkKey = (pem: string) => {
  const parsed = parseKey(pem);
  return typeof parsed === 'string' ? parsed : undefined;
};

/** Kong's wildcard_host: a host name with at most one `*`, as its first or last character. */
export function checkWildcardHost(host: string): string | undefined {
  return validateSni(host);
}

export const certificateSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    cert: { type: 'string', required: true, referenceable: true, custom: checkCertificate },
    key: { type: 'string', required: true, referenceable: true, custom: checkKey },
    cert_alt: { type: 'string', referenceable: true, custom: checkCertificate },
    key_alt: { type: 'string', referenceable: true, custom: checkKey },
    tags: TAGS,
  },
  // Kong's checks (kong/db/schema/entities/certificates.lua): the pair rule, and three written as code.
  entity_checks: [
    describedAs(
      [
        { mutually_required: ['cert_alt', 'key_alt'] },
        ...[['cert', 'key'], ['cert_alt', 'key_alt'], ['cert', 'cert_alt']].map((field_sources) => ({ custom_entity_check: { field_sources } })),
      ],
      checkPairs,
    ),
  ],
} as const satisfies RecordSchema;

function checkPairs(c: Record<string, any>): Issue[] {
  if ((c.cert_alt == null) !== (c.key_alt == null)) {
    return [{ path: [], message: "all or none of these fields must be set: 'cert_alt', 'key_alt'" }];
  }
  const issues: Issue[] = [];
  if (!keyMatches(c.cert, c.key)) issues.push({ path: [], message: 'certificate does not match key' });
  if (c.cert_alt != null) {
    if (!keyMatches(c.cert_alt, c.key_alt)) issues.push({ path: [], message: 'alternative certificate does not match key' });
    if (keyType(c.cert) === keyType(c.cert_alt)) {
      issues.push({
        path: [],
        message: 'certificate and alternative certificate need to have different type (e.g. RSA and ECDSA), the provided certificates were both of the same type',
      });
    }
  }
  return issues;
}

function keyMatches(certPem: string, keyPem: string): boolean {
  const cert = parseCertificate(certPem);
  const key = parseKey(keyPem);
  return typeof cert !== 'string' && typeof key !== 'string' && cert.checkPrivateKey(key);
}

function keyType(certPem: string): string | undefined {
  const cert = parseCertificate(certPem);
  return typeof cert === 'string' ? undefined : cert.publicKey.asymmetricKeyType;
}

export const sniSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    name: { type: 'string', required: true, custom: checkWildcardHost },
    certificate: { type: 'any' },
    tags: TAGS,
  },
} as const satisfies RecordSchema;

export const caCertificateSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    cert: { type: 'string', required: true, custom: checkCaCertificate },
    cert_digest: { type: 'string' },
    tags: TAGS,
  },
} as const satisfies RecordSchema;

function checkCaCertificate(pem: string): string | undefined {
  const first = pem.indexOf(PEM_CERTIFICATE);
  if (first !== -1 && pem.indexOf(PEM_CERTIFICATE, first + PEM_CERTIFICATE.length) !== -1) return 'please submit only one certificate at a time';
  const cert = parseCertificate(pem);
  if (typeof cert === 'string') return cert;
  if (Date.parse(cert.validTo) < Date.now()) return 'certificate expired, "Not After" time is in the past';
  if (!cert.ca) return 'certificate does not appear to be a CA because it is missing the "CA" basic constraint';
  return undefined;
}

/** Kong's `cert_digest`: the SHA-256 fingerprint of the certificate, lowercase hex without colons. */
export function certificateDigest(pem: string): string {
  return new X509Certificate(pem).fingerprint256.replaceAll(':', '').toLowerCase();
}
