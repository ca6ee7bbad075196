/**
 * Example receivers for docs/observability.md: an OTLP/HTTP traces receiver and a StatsD listener, which
 * keep what they get and show it as JSON at `GET /received` (spans with their ids and attributes, StatsD
 * lines as they came).
 *   npm run example:receivers    (OTLP on http://127.0.0.1:4318/v1/traces, StatsD on udp://127.0.0.1:8125)
 * SIGTERM or SIGINT closes both and exits 0.
 */
import dgram from 'node:dgram';
import http from 'node:http';
import { decodeTraces, type ReceivedSpan } from './otlp-decode.ts';

const OTLP_URL = new URL('http://127.0.0.1:4318/v1/traces');
const STATSD_URL = new URL('udp://127.0.0.1:8125');
/** What is kept, at most: the oldest goes first. */
const KEPT = 1000;

const spans: ReceivedSpan[] = [];
const statsdLines: string[] = [];

function keep<T>(list: T[], items: T[]): void {
  list.push(...items);
  list.splice(0, Math.max(0, list.length - KEPT));
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'POST' && req.url === OTLP_URL.pathname) {
      try {
        keep(spans, decodeTraces(Buffer.concat(chunks), req.headers).flatMap((b) => b.spans));
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } catch {
        res.writeHead(400).end();
      }
      return;
    }
    const shown = spans.map((s) => ({ name: s.name, trace_id: s.traceId, span_id: s.spanId, parent_span_id: s.parentSpanId, attributes: s.attributes }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ spans: shown, statsd: statsdLines }, null, 2));
  });
});
server.listen(Number(OTLP_URL.port), OTLP_URL.hostname, () => console.log(`OTLP receiver listening on ${OTLP_URL}`));

const statsd = dgram.createSocket('udp4');
statsd.on('message', (m) => keep(statsdLines, m.toString().split('\n')));
statsd.bind(Number(STATSD_URL.port), STATSD_URL.hostname, () => console.log(`StatsD listener listening on ${STATSD_URL}`));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    statsd.close();
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
