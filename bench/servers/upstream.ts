/** A minimal upstream for proxy benchmarks: a small fixed body, keep-alive. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const body = Buffer.from('{"hello":"world"}');
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
