/**
 * A small httpbin for the proxy-cache and response-ratelimiting suites, answering the paths Kong's specs
 * use: `/get` and `/post` (JSON, the request echoed and a count of requests served), `/status/<n>` (text),
 * `/xml`, `/cache/<n>` (`Cache-Control: public, max-age=<n>`), `/response-headers?<name>=<value>` (each
 * argument as a response header, the JSON of them as body), `/stream/<n>` (n JSON lines, chunked), and
 * `/bytes/<n>` (n bytes, chunked, of `application/json`); anything else a JSON 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startUpstream, type Upstream } from '../../helpers/gateway.ts';

export interface Httpbin extends Upstream {
  /** Requests the upstream has answered. */
  served(): number;
}

export async function startHttpbin(): Promise<Httpbin> {
  let served = 0;
  const upstream = await startUpstream((req, res) => {
    served++;
    req.resume();
    req.on('end', () => answer(req, res, served));
  });
  return Object.assign(upstream, { served: () => served });
}

function answer(req: IncomingMessage, res: ServerResponse, count: number): void {
  const url = new URL(req.url ?? '/', 'http://upstream');
  const [, first, arg] = url.pathname.split('/');
  const json = (status: number, body: unknown, headers: Record<string, string | string[]> = {}) =>
    void res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  switch (first) {
    case 'status':
      return void res.writeHead(Number(arg), { 'content-type': 'text/plain' }).end(`status ${arg}`);
    case 'xml':
      return void res.writeHead(200, { 'content-type': 'application/xml' }).end('<a>b</a>');
    case 'cache':
      return json(200, { count }, { 'cache-control': `public, max-age=${arg}` });
    case 'response-headers': {
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of url.searchParams) {
        const lower = name.toLowerCase();
        const prior = headers[lower];
        headers[lower] = prior === undefined ? value : [prior, value].flat();
      }
      return void res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ headers, count }));
    }
    case 'stream':
      res.writeHead(200, { 'content-type': 'application/json' });
      for (let i = 0; i < Number(arg); i++) res.write(JSON.stringify({ id: i, count }) + '\n');
      return void res.end();
    case 'bytes': {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 'a');
      for (let left = Number(arg); left > 0; left -= chunk.length) res.write(left >= chunk.length ? chunk : chunk.subarray(0, left));
      return void res.end();
    }
    case 'get':
    case 'post':
      return json(200, { method: req.method, path: url.pathname, query: url.search, headers: req.headers, count });
    default:
      return json(404, { message: 'Not found', count });
  }
}
