/**
 * Kong's admin endpoints that describe the admin API itself: `/endpoints` (kong/api/routes/kong.lua) and
 * `/tags`, `/tags/{tag}` (kong/api/routes/tags.lua, kong/db/strategies/off): every tag of every entity
 * the top-level listings show, as `{entity_name, entity_id, tag}`. They read the routes the admin API
 * serves, so an entity kind or an endpoint a plugin adds is covered without being named here.
 */
import type { AdminReply, AdminRequest, AdminRoute } from '../pdk/types.ts';
import { MAX_PAGE_SIZE, pageOf } from '../toolkit/paging.ts';

interface TagRow {
  entity_name: string;
  entity_id: string;
  tag: string;
}

/** `routes` is read when a request comes, so it may be the very list these routes end up in. */
export function discoveryAdminRoutes(routes: () => readonly AdminRoute[]): AdminRoute[] {
  return [
    { method: 'GET', path: '/endpoints', handler: () => ({ status: 200, body: { data: endpoints(routes()) } }) },
    // `/tags` ignores `?tags=`, as Kong's does.
    { method: 'GET', path: '/tags', handler: async (req) => pageOf(await tagRows(routes()), req, '/tags') },
    {
      method: 'GET',
      path: '/tags/:tag',
      handler: async (req) => {
        const rows = (await tagRows(routes())).filter((row) => row.tag === req.params.tag);
        return pageOf(rows, req, `/tags/${encodeURIComponent(req.params.tag)}`);
      },
    },
  ];
}

/** Kong's listing: each path once, `:name` written `{name}`, sorted segment by segment (`/a/z` before `/ab`). */
function endpoints(routes: readonly AdminRoute[]): string[] {
  const paths = new Set(routes.map((route) => route.path.replace(/:([^/]+)/g, '{$1}')));
  const bySegment = (path: string) => path.replaceAll('/', '\x00');
  return [...paths].sort((a, b) => (bySegment(a) < bySegment(b) ? -1 : bySegment(a) > bySegment(b) ? 1 : 0));
}

async function tagRows(routes: readonly AdminRoute[]): Promise<TagRow[]> {
  const rows: TagRow[] = [];
  for (const route of routes) {
    if (route.method !== 'GET' || !route.entity) continue;
    for (const entity of await everyEntity(route)) {
      const tags = (entity as { tags?: unknown }).tags;
      if (!Array.isArray(tags)) continue;
      for (const tag of tags) rows.push({ entity_name: route.entity, entity_id: (entity as { id: string }).id, tag });
    }
  }
  return rows;
}

/** Every entity a listing shows, read page by page through its own handler (so with its own view of them). */
async function everyEntity(listing: AdminRoute): Promise<unknown[]> {
  const entities: unknown[] = [];
  let offset: string | undefined;
  do {
    const query = new URLSearchParams({ size: String(MAX_PAGE_SIZE), ...(offset ? { offset } : {}) });
    const request: AdminRequest = { params: {}, query, body: {}, headers: {} };
    const reply: AdminReply = await listing.handler(request);
    const body = reply.body as { data: unknown[]; offset?: string };
    entities.push(...body.data);
    offset = body.offset;
  } while (offset);
  return entities;
}
