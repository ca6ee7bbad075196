/**
 * gRPC: unary calls per second straight to a grpc-js upstream and through Tollgate (h2c listener, grpc
 * service, no plugins), with their ratio. The upstream and the gateway are child processes; the load is
 * a grpc-js client here keeping a fixed number of calls in flight on one channel.
 * Run alone: `tsx bench/grpc.ts`; `tsx bench/grpc.ts upstream` is the upstream child.
 */
import { echoClient, startGrpcEcho, unary, type EchoClient } from '../test/fixtures/grpc-echo.ts';
import { startChild } from './lib.ts';
import { startTollgate } from './proxy.ts';

const WARMUP_MS = 500;
const MEASURE_MS = 1250;
/** Direct and proxied runs alternate, best of each kept: the loopback host's other load shifts over time. */
const ROUNDS = 2;
const IN_FLIGHT = 64;

/** Calls per second over MEASURE_MS, IN_FLIGHT at a time. */
async function callsPerSecond(client: EchoClient): Promise<number> {
  const run = async (ms: number) => {
    const until = performance.now() + ms;
    let calls = 0;
    const worker = async () => {
      while (performance.now() < until) {
        await unary(client, { message: 'bench' });
        calls++;
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    return calls / ((performance.now() - started) / 1000);
  };
  await run(WARMUP_MS);
  return run(MEASURE_MS);
}

export async function run(): Promise<void> {
  const upstream = await startChild('grpc.ts', ['upstream']);
  const target = new URL(upstream.urls[0]).host;
  const tollgate = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0 http2'], admin_listen: ['127.0.0.1:0'], access_log: false },
      services: [{ name: 'grpc', url: `grpc://${target}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'] }] }],
    },
    2,
  );
  const direct = echoClient(target);
  const proxied = echoClient(new URL(tollgate.urls[0]).host);
  try {
    let directRate = 0;
    let proxiedRate = 0;
    for (let round = 0; round < ROUNDS; round++) {
      directRate = Math.max(directRate, await callsPerSecond(direct));
      proxiedRate = Math.max(proxiedRate, await callsPerSecond(proxied));
    }
    console.log(`\n## gRPC: unary calls/s, ${IN_FLIGHT} in flight on one channel, best of ${ROUNDS} x ${MEASURE_MS / 1000} s (h2c)`);
    console.log('| target | calls/s | ratio |');
    console.log('|---|---|---|');
    console.log(`| direct to upstream | ${Math.round(directRate)} | 1.00 |`);
    console.log(`| tollgate, no plugins | ${Math.round(proxiedRate)} | ${(proxiedRate / directRate).toFixed(2)} |`);
  } finally {
    direct.close();
    proxied.close();
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv[2] === 'upstream') {
    const server = await startGrpcEcho();
    console.log(`listening on http://${server.target}`);
    process.once('SIGTERM', () => server.close().then(() => process.exit(0)));
  } else {
    await run();
  }
}
