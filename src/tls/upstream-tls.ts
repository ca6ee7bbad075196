/**
 * TLS towards an upstream, as Kong sets it per service (kong/runloop/upstream_ssl.lua):
 * - `tls_verify`: verify the upstream's certificate and name (off when unset, as Kong's default);
 * - `ca_certificates`: verify against these CAs only, instead of the system's;
 * - `tls_verify_depth`: at most that many intermediate certificates between the upstream's
 *   certificate and a trusted one (OpenSSL's verify depth, as nginx's proxy_ssl_verify_depth);
 * - `client_certificate` (else the upstream's): presented to the upstream (mTLS).
 */
import tls, { type PeerCertificate } from 'node:tls';
import type { CaCertificate, Certificate, Service, Upstream } from '../config/types.ts';
import { ChainTooLongError } from '../errors.ts';

export interface UpstreamTls {
  /** Connections made with different settings are never pooled together. */
  readonly key: string;
  readonly options: Pick<tls.ConnectionOptions, 'rejectUnauthorized' | 'ca' | 'cert' | 'key' | 'checkServerIdentity'>;
}

export interface TlsMaterialLookup {
  certificate(id: string): Certificate | undefined;
  caCertificate(id: string): CaCertificate | undefined;
}

export function upstreamTls(service: Service, upstream: Upstream | undefined, material: TlsMaterialLookup): UpstreamTls {
  const verify = service.tls_verify ?? false;
  const clientRef = service.client_certificate ?? upstream?.client_certificate ?? null;
  const client = clientRef ? material.certificate(clientRef.id) : undefined;
  const cas = (service.ca_certificates ?? []).map((id) => material.caCertificate(id)!.cert);
  const depth = service.tls_verify_depth;
  const options: UpstreamTls['options'] = {
    rejectUnauthorized: verify,
    ...(cas.length > 0 ? { ca: cas } : {}),
    ...(client ? { cert: client.cert, key: client.key } : {}),
    ...(depth !== null ? { checkServerIdentity: withDepth(depth) } : {}),
  };
  return { key: [verify ? 1 : 0, depth ?? '', (service.ca_certificates ?? []).join(','), clientRef?.id ?? ''].join('|'), options };
}

/** Node has no verify-depth option: the verified chain is counted once the handshake has built it. */
function withDepth(depth: number): (host: string, cert: PeerCertificate) => Error | undefined {
  return (host, cert) => {
    const mismatch = tls.checkServerIdentity(host, cert);
    if (mismatch) return mismatch;
    const intermediates = Math.max(0, chainLength(cert) - 2);
    return intermediates > depth
      ? new ChainTooLongError(`the upstream's certificate chain has ${intermediates} intermediate certificates; tls_verify_depth allows ${depth}`)
      : undefined;
  };
}

/** Certificates from the peer's to its trust anchor (a self-signed one issues itself). */
function chainLength(cert: PeerCertificate): number {
  const seen = new Set<string>();
  for (let c: tls.DetailedPeerCertificate | undefined = cert as tls.DetailedPeerCertificate; c && !seen.has(c.fingerprint256); c = c.issuerCertificate) {
    seen.add(c.fingerprint256);
  }
  return seen.size;
}
