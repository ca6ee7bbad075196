/**
 * Starts the example authorization page: `npm run example:auth-page` (or
 * `node --import tsx examples/authorization-page/server.ts`). Settings come from the environment:
 *
 *   GATEWAY_URL     base URL of the route with the oauth2 plugin   (default https://127.0.0.1:8443/api)
 *   GATEWAY_HOST    Host header for a host-matched route            (default: GATEWAY_URL's host)
 *   ADMIN_URL       Tollgate's admin API                            (default http://127.0.0.1:8001)
 *   PROVISION_KEY   the plugin's provision_key                      (required)
 *   GATEWAY_CA_FILE PEM file to trust for the gateway's certificate (e.g. ./data/tls/gateway.crt)
 *   GATEWAY_TLS_INSECURE=1  development only: accept any gateway certificate
 *   USERS           demo accounts "name:password,…"                 (default alice:wonderland)
 *   HOST, PORT      where the page listens                          (default 127.0.0.1:3301; PORT=0 picks one)
 *   COOKIE_SECURE=1 when the page itself is served over HTTPS
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createAuthorizationPage } from './app.ts';

function parseUsers(spec: string): Map<string, string> {
  const users = new Map<string, string>();
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new Error(`USERS: "${entry}" is not name:password`);
    users.set(entry.slice(0, colon), entry.slice(colon + 1));
  }
  return users;
}

function main(): void {
  const env = process.env;
  const provisionKey = env.PROVISION_KEY;
  if (!provisionKey) {
    console.error('PROVISION_KEY is required (the provision_key of the oauth2 plugin in gateway.yaml)');
    process.exit(1);
  }
  const server = createAuthorizationPage({
    gatewayUrl: env.GATEWAY_URL ?? 'https://127.0.0.1:8443/api',
    gatewayHost: env.GATEWAY_HOST || undefined,
    adminUrl: env.ADMIN_URL ?? 'http://127.0.0.1:8001',
    provisionKey,
    gatewayCa: env.GATEWAY_CA_FILE ? readFileSync(env.GATEWAY_CA_FILE, 'utf8') : undefined,
    insecureTls: env.GATEWAY_TLS_INSECURE === '1',
    users: parseUsers(env.USERS ?? 'alice:wonderland'),
    cookieSecure: env.COOKIE_SECURE === '1',
  });
  const host = env.HOST ?? '127.0.0.1';
  server.listen(Number(env.PORT ?? 3301), host, () => {
    const { port } = server.address() as AddressInfo;
    console.log(`authorization page listening on http://${host}:${port}`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
