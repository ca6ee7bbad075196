/** The admin API's HTTP plumbing: path patterns, body parsing, JSON replies, typed errors. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JsonTooDeepError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { bodyLimitOf, readWhole } from '../pipeline/request-body.ts';
import { answerFor, HttpError } from '../pipeline/http-error.ts';
import type { AdminMethod, AdminReply, AdminRequest, AdminRoute } from '../pdk/types.ts';
import { parseArgs, type Params } from '../toolkit/params.ts';
import { parseUntrustedJson } from '../toolkit/json.ts';
import { MESSAGES } from '../proxy/respond.ts';
import { browserRefusal, type AdminListenerFacts } from './browser-guard.ts';

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

  constructor(
    routes: AdminRoute[],
    private readonly log: Logger,
  ) {
    this.routes = routes.map(compile);
  }

  /** Answers the request whatever happens (never rejects): a handler's failure is its 500, not the process's. */
  async handle(req: IncomingMessage, res: ServerResponse, listener: AdminListenerFacts): Promise<void> {
    let reply: AdminReply;
    try {
      reply = await this.dispatch(req, listener);
    } catch (err) {
      if (!(err instanceof HttpError)) this.log.error({ err, method: req.method, url: req.url }, 'admin request failed');
      const answer = answerFor(err);
      reply = answer ? { status: answer.status, body: answer.body(), headers: answer.headers } : { status: 500, body: { message: MESSAGES.unexpected } };
    }
    try {
      send(res, reply);
    } catch (err) {
      // A reply Node refuses to write (e.g. a header value with a line break from a handler).
      this.log.error({ err, method: req.method, url: req.url }, 'admin reply could not be written');
      if (res.headersSent) res.destroy();
      else send(res, { status: 500, body: { message: MESSAGES.unexpected } });
    }
  }

  private async dispatch(req: IncomingMessage, listener: AdminListenerFacts): Promise<AdminReply> {
    const refusal = browserRefusal(req, listener);
    if (refusal) throw refusal;
    let path: string;
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin');
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
      const client = `${req.socket.remoteAddress}:${req.socket.remotePort}`;
      const request: AdminRequest = { params, query: url.searchParams, ...(await parseBody(req)), headers: req.headers, client };
      return route.handler(request);
    }
    if (pathMatched) return { status: 405, body: { message: 'Method not allowed' } };
    return { status: 404, body: { message: 'Not found' } };
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;
const FORM_TYPE = 'application/x-www-form-urlencoded';

/**
 * JSON, or a form (curl -d; the browser guard has refused foreign origins already). Any other type is
 * refused before the body is read: reading text/plain as JSON is what let a page forge admin calls.
 */
async function parseBody(req: IncomingMessage): Promise<{ body: Record<string, any>; form: boolean }> {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE') {
    req.resume();
    return { body: {}, form: false };
  }
  const type = String(req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const declaresBody = req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
  if (declaresBody && type !== FORM_TYPE && !JSON_TYPE.test(type)) {
    req.resume();
    throw new HttpError(415, `Unsupported Media Type: send application/json (or ${FORM_TYPE})`);
  }
  const raw = await readWhole(req, bodyLimitOf(MAX_ADMIN_BODY));
  if (raw.length === 0) return { body: {}, form: false };
  if (type === FORM_TYPE) return { body: formFields(parseArgs(raw.toString('utf8'))), form: true };
  try {
    const parsed = parseUntrustedJson(raw.toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return { body: parsed, form: false };
  } catch (err) {
    throw new HttpError(400, err instanceof JsonTooDeepError ? `Cannot parse JSON body: ${err.message}` : 'Cannot parse JSON body');
  }
}

/** Kong's form convention: `key[]` makes an array even of one value (repeated keys are arrays already). */
function formFields(args: Params): Record<string, any> {
  const body: Record<string, any> = Object.create(null);
  for (const [key, value] of Object.entries(args)) {
    if (!key.endsWith('[]')) body[key] = value;
    else body[key.slice(0, -2)] = Array.isArray(value) ? value : [value];
  }
  return body;
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
