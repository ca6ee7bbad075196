/** The admin API's HTTP plumbing: path patterns, body parsing, JSON replies, typed errors. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readWhole } from '../pipeline/context.ts';
import { HttpError, type AdminMethod, type AdminReply, type AdminRequest, type AdminRoute } from '../pipeline/plugin-api.ts';

/** Kong caps the admin API's bodies at 10m; configuration-sized bodies do not belong here anyway. */
const MAX_ADMIN_BODY = 1024 * 1024;

interface CompiledRoute {
  method: AdminMethod;
  pattern: RegExp;
  names: string[];
  handler: AdminRoute['handler'];
}

function compile(route: AdminRoute): CompiledRoute {
  const names: string[] = [];
  const source = route.path
    .split('/')
    .map((seg) => {
      if (!seg.startsWith(':')) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(seg.slice(1));
      return '([^/]+)';
    })
    .join('/');
  return { method: route.method, pattern: new RegExp(`^${source}/?$`), names, handler: route.handler };
}

export class AdminRouter {
  private readonly routes: CompiledRoute[];

  constructor(routes: AdminRoute[]) {
    this.routes = routes.map(compile);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://admin');
    try {
      const reply = await this.dispatch(req, url);
      send(res, reply);
    } catch (err) {
      if (err instanceof HttpError) send(res, { status: err.status, body: { message: err.message }, headers: err.headers });
      else send(res, { status: 500, body: { message: 'An unexpected error occurred' } });
      if (!(err instanceof HttpError)) console.error(err);
    }
  }

  private async dispatch(req: IncomingMessage, url: URL): Promise<AdminReply> {
    let path: string;
    try {
      path = decodeURI(url.pathname);
    } catch {
      throw new HttpError(400, 'invalid path');
    }
    let pathMatched = false;
    for (const route of this.routes) {
      const m = route.pattern.exec(path);
      if (!m) continue;
      pathMatched = true;
      if (route.method !== req.method && !(route.method === 'GET' && req.method === 'HEAD')) continue;
      const params = Object.fromEntries(route.names.map((n, i) => [n, decodeURIComponent(m[i + 1])]));
      const request: AdminRequest = { params, query: url.searchParams, body: await parseBody(req), headers: req.headers };
      return route.handler(request);
    }
    if (pathMatched) return { status: 405, body: { message: 'Method not allowed' } };
    return { status: 404, body: { message: 'Not found' } };
  }
}

async function parseBody(req: IncomingMessage): Promise<Record<string, any>> {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE') {
    req.resume();
    return {};
  }
  const raw = await readWhole(req, MAX_ADMIN_BODY);
  if (raw.length === 0) return {};
  const type = String(req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') {
    const body: Record<string, any> = {};
    for (const [k, v] of new URLSearchParams(raw.toString('utf8'))) {
      // Kong's form convention: repeated keys and `key[]` make arrays.
      const key = k.endsWith('[]') ? k.slice(0, -2) : k;
      if (key in body) body[key] = [...(Array.isArray(body[key]) ? body[key] : [body[key]]), v];
      else body[key] = k.endsWith('[]') ? [v] : v;
    }
    return body;
  }
  try {
    const parsed = JSON.parse(raw.toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed;
  } catch {
    throw new HttpError(400, 'Cannot parse JSON body');
  }
}

function send(res: ServerResponse, reply: AdminReply): void {
  if (res.headersSent) return;
  const headers = { ...reply.headers };
  if (reply.body === undefined || reply.status === 204) {
    res.writeHead(reply.status, headers).end();
    return;
  }
  if (typeof reply.body === 'string' && Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    res.writeHead(reply.status, headers).end(reply.body);
    return;
  }
  const body = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers }).end(body);
}
