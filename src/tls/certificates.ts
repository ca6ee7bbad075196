/**
 * The certificate a TLS listener presents for a client's server name (kong/runloop/certificate.lua
 * find_certificate): the SNI of that exact name, else `*.<rest>` (names of three labels or more),
 * else `<all but last>.*`, else the SNI `*`, else the listener's default certificate.
 */
import { createHash } from 'node:crypto';
import tls, { type SecureContext } from 'node:tls';
import type { Certificate, Sni } from '../config/types.ts';

export class CertificateIndex {
  private readonly bySni = new Map<string, Certificate>();
  /** Secure contexts by certificate content, made on first use and kept across reloads that keep the certificate. */
  private readonly contexts: Map<string, SecureContext>;

  constructor(certificates: Certificate[], snis: Sni[], previous?: CertificateIndex) {
    const byId = new Map(certificates.map((c) => [c.id, c]));
    for (const sni of snis) this.bySni.set(sni.name.toLowerCase(), byId.get(sni.certificate.id)!);
    const wanted = new Set(certificates.map(contentKey));
    this.contexts = new Map([...(previous?.contexts ?? [])].filter(([key]) => wanted.has(key)));
  }

  /** The configured certificate for `servername`, if one applies. */
  find(servername: string): Certificate | undefined {
    const name = servername.toLowerCase().replace(/\.$/, '');
    return this.bySni.get(name) ?? this.wildcard(name) ?? this.bySni.get('*');
  }

  private wildcard(name: string): Certificate | undefined {
    const labels = name.split('.');
    if (labels.length >= 3) {
      const prefixed = this.bySni.get(`*.${labels.slice(1).join('.')}`);
      if (prefixed) return prefixed;
    }
    return labels.length >= 2 ? this.bySni.get(`${labels.slice(0, -1).join('.')}.*`) : undefined;
  }

  /** For tls.Server's SNICallback: undefined keeps the listener's default certificate. */
  contextFor(servername: string): SecureContext | undefined {
    const certificate = this.find(servername);
    if (!certificate) return undefined;
    const key = contentKey(certificate);
    let context = this.contexts.get(key);
    if (!context) {
      // Both pairs when there is an alternative one (RSA and ECDSA): the handshake picks what the client supports.
      const pairs = certificate.cert_alt
        ? [
            [certificate.cert, certificate.key],
            [certificate.cert_alt, certificate.key_alt!],
          ]
        : [[certificate.cert, certificate.key]];
      context = tls.createSecureContext({ cert: pairs.map((p) => p[0]), key: pairs.map((p) => p[1]) });
      this.contexts.set(key, context);
    }
    return context;
  }
}

function contentKey(c: Certificate): string {
  return createHash('sha256').update([c.cert, c.key, c.cert_alt ?? '', c.key_alt ?? ''].join('\0')).digest('hex');
}
