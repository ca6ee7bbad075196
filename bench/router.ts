/**
 * Router bench: 1M matches over ~100 routes (hosts, wildcards, methods, headers, regexes, long prefixes),
 * with the LRU (repeated request shapes, the common case) and without it (every match walks the matchers).
 */
import type { Route, Service } from '../src/config/types.ts';
import { Router, type RouteRequest } from '../src/router/index.ts';

const MATCHES = 1_000_000;

function fixture(): { routes: Route[]; services: Service[]; requests: RouteRequest[] } {
  const services: Service[] = [];
  const routes: Route[] = [];
  const requests: RouteRequest[] = [];
  for (let i = 0; i < 100; i++) {
    const id = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    services.push({
      id,
      name: `svc${i}`,
      protocol: 'http',
      host: 'upstream.test',
      port: 80,
      path: i % 2 ? '/base' : null,
      retries: 5,
      connect_timeout: 60000,
      write_timeout: 60000,
      read_timeout: 60000,
      tls_verify: null,
      tls_verify_depth: null,
      ca_certificates: null,
      client_certificate: null,
      enabled: true,
      tags: null,
      created_at: i,
      updated_at: i,
    });
    const shape = i % 5;
    routes.push({
      id, name: null, protocols: ['http', 'https'],
      methods: shape === 1 ? ['GET', 'POST'] : null,
      hosts: shape === 2 ? [`api${i}.example.com`] : shape === 3 ? ['*.example.org'] : null,
      paths: shape === 4 ? [`~/v${i}/users/(?<id>\\d+)`] : [`/service${i}/resource`, `/s${i}`],
      headers: shape === 0 ? { 'x-tenant': [`t${i}`] } : null,
      snis: null, strip_path: true, preserve_host: false, regex_priority: 0, path_handling: 'v0',
      https_redirect_status_code: 426, request_buffering: true, response_buffering: true,
      service: { id }, tags: null, created_at: i, updated_at: i,
    });
    requests.push({
      method: 'GET',
      path: shape === 4 ? `/v${i}/users/${i * 7}` : `/service${i}/resource/item/${i}`,
      host: shape === 2 ? `api${i}.example.com` : shape === 3 ? 'www.example.org' : 'gateway.test',
      port: 8000,
      headers: { 'x-tenant': `t${i}`, accept: '*/*' },
      scheme: 'http',
    });
  }
  requests.push({ method: 'GET', path: '/nowhere', host: 'gateway.test', port: 8000, headers: {}, scheme: 'http' });
  return { routes, services, requests };
}

function time(router: Router, requests: RouteRequest[], count: number): number {
  let matched = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i++) if (router.match(requests[i % requests.length]) !== null) matched++;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (matched === 0) throw new Error('bench fixture matched nothing');
  return count / seconds;
}

export async function run(): Promise<void> {
  const { routes, services, requests } = fixture();
  const cached = new Router(routes, services);
  const uncached = new Router(routes, services, { cacheSize: 0 });
  time(cached, requests, 10_000); // warm-up
  time(uncached, requests, 10_000);
  const withCache = time(cached, requests, MATCHES);
  const withoutCache = time(uncached, requests, MATCHES);
  console.log(`router: ${routes.length} routes, ${MATCHES} matches`);
  console.log(`router: ${Math.round(withCache).toLocaleString('en-US')} matches/s with the LRU cache`);
  console.log(`router: ${Math.round(withoutCache).toLocaleString('en-US')} matches/s without cache (full scan)`);
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
