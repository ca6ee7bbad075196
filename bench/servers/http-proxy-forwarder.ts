/** Reference forwarder: bare node-http-proxy with a keep-alive agent, nothing else. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import httpProxy from 'http-proxy';

const target = process.argv[2];
const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 512 });
const proxy = httpProxy.createProxyServer({ target, agent });
proxy.on('error', (_err, _req, res) => {
  const r = res as http.ServerResponse;
  if (!r.headersSent) r.writeHead(502);
  r.end();
});
const server = http.createServer((req, res) => proxy.web(req, res));
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
