/**
 * An example log server for docs/logging.md: takes what http-log sends (one JSON object, or an array of
 * them for a batch) and shows the entries it got on a GET, newest last.
 *   npm run example:log-receiver        (listens on 127.0.0.1:3001, or PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import http from 'node:http';

const port = Number(process.env.PORT ?? 3001);
/** The most entries kept: the oldest go first. */
const KEPT = 100;
/** The largest body taken (a batch of many entries); a larger one is refused with 413. */
const MAX_BODY = 4 * 1024 * 1024;
const entries: unknown[] = [];
const batches: number[] = [];

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    const body = JSON.stringify({ batches, entries });
    return void res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_BODY) return void res.writeHead(413).end();
    try {
      const received = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const batch = Array.isArray(received) ? received : [received];
      batches.push(batch.length);
      entries.push(...batch);
      entries.splice(0, Math.max(0, entries.length - KEPT));
      batches.splice(0, Math.max(0, batches.length - KEPT));
      res.writeHead(200).end('ok');
    } catch {
      res.writeHead(400).end('not JSON');
    }
  });
});
server.listen(port, '127.0.0.1', () => console.log(`example log receiver listening on http://127.0.0.1:${port}`));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
