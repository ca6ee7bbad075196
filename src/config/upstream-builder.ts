/**
 * Builds `upstreams` (with nested `targets`) and top-level `targets` (`upstream:` by name or id).
 * A target's id derives from its upstream and its address, so the same target keeps its id (and the
 * health it has in a running gateway) across reloads.
 */
import type { Path } from './schema.ts';
import { resolveReference, type BuildContext } from './builder-context.ts';
import { certificateRef } from './certificate-builder.ts';
import type { Certificate, Target, Upstream } from './types.ts';
import { applyAlgorithmShorthands, formatTarget, targetSchema, upstreamSchema } from './upstreams.ts';

export interface Balancing {
  upstreams: Upstream[];
  targets: Target[];
}

export function buildBalancing(raw: Record<string, any>, ctx: BuildContext, certificates: Certificate[]): Balancing {
  const out: Balancing = { upstreams: [], targets: [] };
  ctx.eachEntry(raw, 'upstreams', (u, path) => addUpstream(u, path, ctx, out, certificates));
  ctx.eachEntry(raw, 'targets', (t, path) => addTarget(t, path, ctx, out, undefined));
  return out;
}

function addUpstream(raw: Record<string, any>, path: Path, ctx: BuildContext, out: Balancing, certificates: Certificate[]): void {
  const u = ctx.validateEntity<Record<string, any>>(upstreamSchema, applyAlgorithmShorthands(raw), path, ['targets']);
  if (typeof u.name !== 'string') return;
  const id = ctx.id(u.id, `upstreams:${u.name}`);
  if (ctx.unique('upstreams', 'name', u.name, path, out.upstreams) || ctx.unique('upstreams', 'id', id, path, out.upstreams)) return;
  const clientCertificate = certificateRef(u.client_certificate, path, ctx, certificates);
  out.upstreams.push(ctx.stamped('upstreams', u, {
    id,
    name: u.name,
    algorithm: u.algorithm,
    hash_on: u.hash_on,
    hash_fallback: u.hash_fallback,
    hash_on_header: u.hash_on_header ?? null,
    hash_fallback_header: u.hash_fallback_header ?? null,
    hash_on_cookie: u.hash_on_cookie ?? null,
    hash_on_cookie_path: u.hash_on_cookie_path,
    hash_on_query_arg: u.hash_on_query_arg ?? null,
    hash_fallback_query_arg: u.hash_fallback_query_arg ?? null,
    hash_on_uri_capture: u.hash_on_uri_capture ?? null,
    hash_fallback_uri_capture: u.hash_fallback_uri_capture ?? null,
    slots: u.slots,
    healthchecks: withNulls(u.healthchecks),
    tags: u.tags ?? null,
    host_header: u.host_header ?? null,
    client_certificate: clientCertificate,
    use_srv_name: u.use_srv_name,
  }));
  ctx.eachEntry(raw, 'targets', (t, p) => addTarget(t, p, ctx, out, id), path);
}

/** Optional probe settings the file left out read as null, as in Kong's admin API. */
function withNulls(healthchecks: Record<string, any>): Upstream['healthchecks'] {
  const active = { https_sni: null, headers: null, ...healthchecks.active };
  return { ...healthchecks, active } as Upstream['healthchecks'];
}

function addTarget(raw: Record<string, any>, path: Path, ctx: BuildContext, out: Balancing, parentId: string | undefined): void {
  const t = ctx.validateEntity<Record<string, any>>(targetSchema, raw, path, []);
  const site = { at: [...path, 'upstream'], field: 'upstream', entity: 'upstreams', required: true };
  const upstreamId = parentId ?? resolveReference(raw.upstream, out.upstreams, site, ctx);
  const target = typeof t.target === 'string' ? formatTarget(t.target) : null;
  if (!upstreamId || !target) return;
  const id = ctx.id(t.id, `targets:${upstreamId}:${target}`);
  const sameUpstream = out.targets.filter((x) => x.upstream.id === upstreamId);
  if (ctx.unique('targets', 'target', target, path, sameUpstream) || ctx.unique('targets', 'id', id, path, out.targets)) return;
  out.targets.push(ctx.stamped('targets', t, { id, target, weight: t.weight, upstream: { id: upstreamId }, tags: t.tags ?? null }));
}
