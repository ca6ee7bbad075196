/**
 * An example log server for docs/logging.md: takes what http-log sends (one JSON object, or an array of
 * them for a batch) over HTTP, tcp-log's lines over TCP and udp-log's datagrams, and shows what it got
 * on a GET, newest last.
 *   npm run example:log-receiver        (HTTP on 127.0.0.1:3001, TCP on 3002, UDP on 3003; or PORT, TCP_PORT, UDP_PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import dgram from 'node:dgram';
import http from 'node:http';
import net from 'node:net';

const httpPort = Number(process.env.PORT ?? 3001);
const tcpPort = Number(process.env.TCP_PORT ?? 3002);
const udpPort = Number(process.env.UDP_PORT ?? 3003);
/** The most entries kept of each kind: the oldest go first. */
const KEPT = 100;
/** The largest body or line taken; a larger one is refused (HTTP: 413) or dropped. */
const MAX_BODY = 4 * 1024 * 1024;
const received = { batches: [] as number[], entries: [] as unknown[], tcp: [] as unknown[], udp: [] as unknown[] };

function keep(list: unknown[], ...items: unknown[]): void {
  list.push(...items);
  list.splice(0, Math.max(0, list.length - KEPT));
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { unparsable: text.slice(0, 200) };
  }
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    const body = JSON.stringify(received);
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
    const body = parsed(Buffer.concat(chunks).toString('utf8'));
    const batch = Array.isArray(body) ? body : [body];
    keep(received.batches, batch.length);
    keep(received.entries, ...batch);
    res.writeHead(200).end('ok');
  });
});

const tcp = net.createServer((socket) => {
  let buffered = '';
  socket.on('error', () => {});
  socket.on('data', (chunk) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop()!.slice(-MAX_BODY);
    for (const line of lines) if (line) keep(received.tcp, parsed(line));
  });
});

const udp = dgram.createSocket('udp4');
udp.on('message', (message) => keep(received.udp, parsed(message.toString('utf8'))));

let listening = 0;
const ready = () => {
  if (++listening === 3) console.log(`example log receiver listening on http://127.0.0.1:${httpPort} (TCP ${tcpPort}, UDP ${udpPort})`);
};
server.listen(httpPort, '127.0.0.1', ready);
tcp.listen(tcpPort, '127.0.0.1', ready);
udp.bind(udpPort, '127.0.0.1', ready);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    udp.close();
    tcp.close();
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
