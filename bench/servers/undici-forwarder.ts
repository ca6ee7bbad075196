/** Reference forwarder: a node:http server relaying through an undici Pool, nothing else. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const pool = new Pool(process.argv[2], { connections: 128, pipelining: 1 });
const server = http.createServer(async (req, res) => {
  try {
    const { statusCode, headers, body } = await pool.request({ path: req.url ?? '/', method: req.method as 'GET', headers: req.headers, body: req.method === 'GET' ? undefined : req });
    delete headers.connection;
    delete headers['keep-alive'];
    res.writeHead(statusCode, headers as http.OutgoingHttpHeaders);
    body.pipe(res);
  } catch {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
