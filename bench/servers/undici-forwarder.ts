/**
 * The Node floor: the least a Node proxy can do. A node:http server streaming each request through an
 * undici Pool (`Pool.stream()`: the upstream's body written straight into the response), hop-by-hop
 * headers dropped both ways (RFC 9110 §7.6.1), nothing else.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** `headers` without the hop-by-hop ones, nor those the Connection header names. */
function endToEnd(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const named = String(headers.connection ?? '').toLowerCase().split(',').map((token) => token.trim());
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.includes(name)) kept[name] = value;
  }
  return kept;
}

const pool = new Pool(process.argv[2], { connections: 128, pipelining: 1 });
const server = http.createServer((req, res) => {
  const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : req;
  pool
    .stream({ path: req.url ?? '/', method: req.method as 'GET', headers: endToEnd(req.headers), body }, ({ statusCode, headers }) => {
      res.writeHead(statusCode, endToEnd(headers));
      return res;
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
