/**
 * Fixture of the request metering tests: a gateway with the metering route (oauth2 + metering) and a
 * proxied route `/api` to a real upstream carrying `metering-and-billing`, two consumers whose
 * client-credentials tokens (global credentials) work on both routes, and helpers to read what was
 * metered through the metering API itself.
 */
import assert from 'node:assert/strict';
import { request, type Reply } from '../../helpers/gateway.ts';
import { MeteringApi, ROUTE_PATH } from '../metering/catalogue-support.ts';

export { MeteringApi, ROUTE_PATH };

export const ALICE = { username: 'alice', custom_id: 'cust-alice', client_id: 'alice-app', client_secret: 'alice-secret-0123456789' };
export const BOB = { username: 'bob', custom_id: 'cust-bob', client_id: 'bob-app', client_secret: 'bob-secret-0123456789' };

export interface FixtureOptions {
  /** `config` of metering-and-billing on the `/api` route (none: the plugin is not there). */
  plugin?: Record<string, unknown> | null;
  /** Global plugins of the file. */
  plugins?: Record<string, unknown>[];
  meters?: Record<string, unknown>[];
  /** The upstream of `/api` (the protocol of its service follows the URL). */
  upstream: string;
  /** Extra routes and services. */
  services?: Record<string, unknown>[];
  gateway?: Record<string, unknown>;
}

export const oauth2 = { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } };

export function fixtureConfig(options: FixtureOptions): Record<string, any> {
  const apiPlugins: Record<string, unknown>[] = [oauth2];
  if (options.plugin !== null && options.plugin !== undefined) apiPlugins.push({ name: 'metering-and-billing', config: options.plugin });
  return {
    ...(options.gateway ? { gateway: options.gateway } : {}),
    services: [
      { name: 'api', url: options.upstream, routes: [{ name: 'api', paths: ['/api'], plugins: apiPlugins }] },
      ...(options.services ?? []),
    ],
    routes: [
      {
        name: 'metering',
        paths: [ROUTE_PATH],
        protocols: ['https'],
        strip_path: false,
        plugins: [oauth2, { name: 'metering', config: {} }],
      },
    ],
    consumers: [ALICE, BOB].map(({ client_id, client_secret, ...consumer }) => ({
      ...consumer,
      oauth2_credentials: [{ name: `${consumer.username} app`, client_id, client_secret }],
    })),
    plugins: options.plugins ?? [],
    meters: options.meters ?? [],
  };
}

export async function tokenOf(httpsBase: string, who: { client_id: string; client_secret: string }): Promise<string> {
  const res = await request(`${httpsBase}${ROUTE_PATH}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: who.client_id, client_secret: who.client_secret }).toString(),
  });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

/** The metering API of the gateway, as alice (any token of the route may read and write there). */
export async function meteringApi(httpsBase: string): Promise<MeteringApi> {
  return new MeteringApi(`${httpsBase}${ROUTE_PATH}`, await tokenOf(httpsBase, ALICE));
}

/** A request through `/api` as the token's consumer. */
export function call(base: string, token: string | null, path = '/api/things', options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return request(`${base}${path}`, {
    method: options.method ?? 'GET',
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...options.headers },
    body: options.body,
  });
}

/** The node id the admin API reports (`GET /`), which request events carry as `tollgate/<node id>`. */
export async function nodeIdOf(admin: string): Promise<string> {
  return (await request(`${admin}/`)).json().node_id;
}

/** One series of the admin API's /metrics, summed over the label sets that contain `labels`. */
export async function metric(admin: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = (await request(`${admin}/metrics`)).text;
  let total = 0;
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`).exec(line);
    if (!match) continue;
    const have = Object.fromEntries([...(match[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(match[2]);
  }
  return total;
}
