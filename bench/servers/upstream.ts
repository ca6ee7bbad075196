/** A minimal upstream for proxy benchmarks: a small fixed body, keep-alive. An argument N listens on N ports (one process). */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const body = Buffer.from('{"hello":"world"}');
const handler: http.RequestListener = (req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
};
for (let i = 0; i < Number(process.argv[2] ?? 1); i++) {
  const server = http.createServer(handler);
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
}
