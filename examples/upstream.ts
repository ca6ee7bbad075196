/**
 * An example upstream for the README walk-through: echoes each request as JSON, so you can see what
 * the gateway sent (path after strip_path, X-Forwarded-*, identity headers from the oauth2 plugin).
 * A `x-kong-limit` query argument comes back as the `X-Kong-Limit` header that response-ratelimiting reads.
 *   npm run example:upstream            (listens on 127.0.0.1:3000, or PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import http from 'node:http';

const port = Number(process.env.PORT ?? 3000);
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }, null, 2);
    // An upstream that meters its own answers (`video=1`) tells the gateway so (docs/plugins.md, response-ratelimiting).
    const usage = new URL(req.url ?? '/', 'http://upstream').searchParams.get('x-kong-limit');
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(usage ? { 'x-kong-limit': usage } : {}) };
    res.writeHead(200, headers).end(body);
  });
});
server.listen(port, '127.0.0.1', () => console.log(`example upstream listening on http://127.0.0.1:${port}`));

// Stopped by a script or a service manager: open connections (keep-alive clients) must not keep it up.
// npm runs it as one node process (`node --import tsx`, no tsx parent in between that could lose the signal).
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
