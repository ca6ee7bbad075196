/** `npm run bench`: every benchmark area in turn. Prints figures and ratios; never fails on speed. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

const AREAS = ['proxy', 'peers', 'latency', 'router', 'balancer', 'oauth2', 'key-auth', 'hmac-auth', 'rate-limiting', 'proxy-cache', 'metering', 'billing', 'request-metering', 'money-path', 'notifications', 'grpc', 'websocket', 'cluster', 'ai-proxy', 'logging'];
/** Areas too long for the default set (`soak` takes 20 minutes): they run only when named. */
const NAMED_ONLY = ['soak'];
const only = process.argv.slice(2);

console.log(`# Tollgate benchmarks (${new Date().toISOString()}, node ${process.version})`);
for (const area of [...AREAS, ...NAMED_ONLY]) {
  if (only.length > 0 ? !only.includes(area) : NAMED_ONLY.includes(area)) continue;
  const file = resolve(import.meta.dirname, `${area}.ts`);
  if (!existsSync(file)) continue;
  try {
    const mod = (await import(file)) as { run(): Promise<void> };
    await mod.run();
  } catch (err) {
    console.log(`\n## ${area}: failed to run: ${(err as Error).message}`);
  }
}
process.exit(0);
