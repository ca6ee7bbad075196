/**
 * A local stand-in for AWS Lambda's Invoke API, for docs/serverless.md: it runs function.ts's handler with
 * the event the aws-lambda plugin sends, as `sam local start-lambda` would. It does not check signatures.
 *   npm run example:lambda              (listens on 127.0.0.1:3002, or PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import http from 'node:http';
import { handler } from './function.ts';

const port = Number(process.env.PORT ?? 3002);
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    if (!/^\/2015-03-31\/functions\/[^/]+\/invocations/.test(req.url ?? '')) return void res.writeHead(404).end();
    try {
      const result = JSON.stringify(await handler(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')));
      res.writeHead(200, { 'content-type': 'application/json', 'x-amz-executed-version': '$LATEST' }).end(result);
    } catch (err) {
      res.writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' }).end(JSON.stringify({ errorMessage: (err as Error).message }));
    }
  });
});
server.listen(port, '127.0.0.1', () => console.log(`example Lambda stand-in listening on http://127.0.0.1:${port}`));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
