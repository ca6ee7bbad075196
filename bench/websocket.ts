/**
 * WebSocket: echoed messages per second straight to a `ws` upstream and through Tollgate (ws route, no
 * plugins), with their ratio. The upstream and the gateway are child processes; the load is `ws` clients
 * here, each keeping a window of small messages in flight.
 * Run alone: `tsx bench/websocket.ts`; `tsx bench/websocket.ts upstream` is the upstream child.
 */
import { once } from 'node:events';
import WebSocket from 'ws';
import { startWsEcho } from '../test/fixtures/ws-echo.ts';
import { startChild } from './lib.ts';
import { startTollgate } from './proxy.ts';

const WARMUP_MS = 500;
const MEASURE_MS = 1250;
/** Direct and proxied runs alternate, best of each kept: the loopback host's other load shifts over time. */
const ROUNDS = 2;
const CONNECTIONS = 16;
const WINDOW = 16;
const MESSAGE = Buffer.alloc(64, 'x');

/** Echoes per second over `ms` on one connection, WINDOW messages in flight. */
function echoLoop(ws: WebSocket, ms: number): Promise<number> {
  return new Promise((resolve) => {
    const until = performance.now() + ms;
    let echoed = 0;
    let inFlight = 0;
    const onMessage = () => {
      echoed++;
      inFlight--;
      if (performance.now() < until) {
        ws.send(MESSAGE);
        inFlight++;
      } else if (inFlight === 0) {
        ws.off('message', onMessage);
        resolve(echoed);
      }
    };
    ws.on('message', onMessage);
    for (; inFlight < WINDOW; inFlight++) ws.send(MESSAGE);
  });
}

async function messagesPerSecond(url: string): Promise<number> {
  const sockets = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const ws = new WebSocket(url);
      await once(ws, 'open');
      return ws;
    }),
  );
  try {
    await Promise.all(sockets.map((ws) => echoLoop(ws, WARMUP_MS)));
    const started = performance.now();
    const counts = await Promise.all(sockets.map((ws) => echoLoop(ws, MEASURE_MS)));
    return counts.reduce((a, b) => a + b, 0) / ((performance.now() - started) / 1000);
  } finally {
    for (const ws of sockets) ws.terminate();
  }
}

export async function run(): Promise<void> {
  const upstream = await startChild('websocket.ts', ['upstream']);
  const target = upstream.urls[0];
  const tollgate = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
      services: [{ name: 'ws', url: target.replace(/^http/, 'ws'), routes: [{ name: 'ws', protocols: ['ws'], paths: ['/echo'], strip_path: false }] }],
    },
    2,
  );
  try {
    let directRate = 0;
    let proxiedRate = 0;
    for (let round = 0; round < ROUNDS; round++) {
      directRate = Math.max(directRate, await messagesPerSecond(`${target.replace(/^http/, 'ws')}/echo`));
      proxiedRate = Math.max(proxiedRate, await messagesPerSecond(`${tollgate.urls[0].replace(/^http/, 'ws')}/echo`));
    }
    console.log(`\n## WebSocket: echoed messages/s, ${CONNECTIONS} connections x ${WINDOW} in flight, ${MESSAGE.length} B, best of ${ROUNDS} x ${MEASURE_MS / 1000} s`);
    console.log('| target | messages/s | ratio |');
    console.log('|---|---|---|');
    console.log(`| direct to upstream | ${Math.round(directRate)} | 1.00 |`);
    console.log(`| tollgate, no plugins | ${Math.round(proxiedRate)} | ${(proxiedRate / directRate).toFixed(2)} |`);
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv[2] === 'upstream') {
    const server = await startWsEcho();
    console.log(`listening on http://127.0.0.1:${server.port}`);
    process.once('SIGTERM', () => server.close().then(() => process.exit(0)));
  } else {
    await run();
  }
}
