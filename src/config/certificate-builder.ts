/**
 * Builds `certificates` (with nested `snis`), top-level `snis` and `ca_certificates` from the file.
 * Certificates have no name: their derived id comes from the certificate itself, so it stays the
 * same across loads as long as the certificate does.
 */
import { createHash } from 'node:crypto';
import { isPlainObject, type Path } from './schema.ts';
import { refKey, resolveReference, type BuildContext } from './builder-context.ts';
import { caCertificateSchema, certificateDigest, certificateSchema, sniSchema } from './certificates.ts';
import type { CaCertificate, Certificate, Sni } from './types.ts';

export interface TlsEntities {
  certificates: Certificate[];
  snis: Sni[];
  ca_certificates: CaCertificate[];
}

export function buildTlsEntities(raw: Record<string, any>, ctx: BuildContext): TlsEntities {
  const out: TlsEntities = { certificates: [], snis: [], ca_certificates: [] };
  ctx.eachEntry(raw, 'certificates', (c, path) => addCertificate(c, path, ctx, out));
  ctx.eachEntry(raw, 'snis', (s, path) => addSni(s, path, ctx, out, undefined));
  ctx.eachEntry(raw, 'ca_certificates', (c, path) => addCaCertificate(c, path, ctx, out));
  return out;
}

/** A reference to a certificate (`client_certificate` of a service or an upstream): its id, or null. */
export function certificateRef(ref: unknown, path: Path, ctx: BuildContext, certificates: Certificate[]): { id: string } | null {
  const site = { at: [...path, 'client_certificate'], field: 'client_certificate', entity: 'certificates', required: false };
  const id = resolveReference(ref, certificates, site, ctx);
  return id ? { id } : null;
}

function addCertificate(raw: Record<string, any>, path: Path, ctx: BuildContext, out: TlsEntities): void {
  const dereferenced = ctx.dereference(raw, certificateSchema, path);
  if (!dereferenced) return;
  const c = ctx.validateEntity<Record<string, any>>(certificateSchema, dereferenced, path, ['snis']);
  const fingerprint = typeof c.cert === 'string' ? createHash('sha256').update(c.cert.trim()).digest('hex') : `#${path.join('.')}`;
  const id = ctx.id(c.id, `certificates:${fingerprint}`);
  if (ctx.unique('certificates', 'id', id, path, out.certificates)) return;
  const certificate: Certificate = ctx.stamped('certificates', c, {
    id,
    cert: c.cert,
    key: c.key,
    cert_alt: c.cert_alt ?? null,
    key_alt: c.key_alt ?? null,
    tags: c.tags ?? null,
    snis: [] as string[],
  });
  out.certificates.push(certificate);
  // Kong's admin API takes `snis` as names; its declarative format nests SNI records. Both are read.
  const nested = Array.isArray(raw.snis) ? { snis: raw.snis.map((s: unknown) => (typeof s === 'string' ? { name: s } : s)) } : raw;
  ctx.eachEntry(nested, 'snis', (s, p) => addSni(s, p, ctx, out, id), path);
}

function addSni(raw: Record<string, any>, path: Path, ctx: BuildContext, out: TlsEntities, parentId: string | undefined): void {
  const s = ctx.validateEntity<Record<string, any>>(sniSchema, raw, path, []);
  let certificateId = parentId;
  if (certificateId === undefined) {
    const site = { at: [...path, 'certificate'], field: 'certificate', entity: 'certificates', required: true };
    certificateId = resolveReference(raw.certificate, out.certificates, site, ctx);
  } else if (raw.certificate !== undefined && refKey(raw.certificate) !== parentId) {
    ctx.issue([...path, 'certificate'], 'value must be null');
  }
  if (typeof s.name !== 'string' || !certificateId) return;
  const id = ctx.id(s.id, `snis:${s.name}`);
  if (ctx.unique('snis', 'name', s.name, path, out.snis)) return;
  out.snis.push(ctx.stamped('snis', s, { id, name: s.name, certificate: { id: certificateId }, tags: s.tags ?? null }));
  out.certificates.find((c) => c.id === certificateId)!.snis.push(s.name);
}

function addCaCertificate(raw: Record<string, any>, path: Path, ctx: BuildContext, out: TlsEntities): void {
  const c = ctx.validateEntity<Record<string, any>>(caCertificateSchema, raw, path, []);
  if (typeof c.cert !== 'string' || !isPlainObject(c)) return;
  let digest: string;
  try {
    digest = certificateDigest(c.cert);
  } catch {
    return; // the schema reported the certificate already
  }
  // An export carries the digest Kong computed: it must be this certificate's.
  if (c.cert_digest != null && c.cert_digest !== digest) ctx.issue([...path, 'cert_digest'], `does not match the certificate (its SHA-256 digest is ${digest})`);
  if (ctx.unique('ca_certificates', 'cert_digest', digest, path, out.ca_certificates)) return;
  const id = ctx.id(c.id, `ca_certificates:${digest}`);
  if (ctx.unique('ca_certificates', 'id', id, path, out.ca_certificates)) return;
  out.ca_certificates.push(ctx.stamped('ca_certificates', c, { id, cert: c.cert, cert_digest: digest, tags: c.tags ?? null }));
}
