/**
 * docs/plugin-development.md's whole plugin, as printed there, through a real gateway: the block is
 * written to a folder of its own (its PDK import pointed at this checkout's), registered beside the
 * bundled plugins, and driven by a client: refused and admitted versions, what the upstream and the
 * client see, its metric, and its checkConfig refusing a file.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ConfigLoadError } from '../../src/errors.ts';
import { Gateway } from '../../src/gateway.ts';
import { PACKAGE_ROOT } from '../../src/package-root.ts';
import type { PluginDefinition } from '../../src/pdk/types.ts';
import { bundledPlugins } from '../../src/plugins.ts';
import { request, startUpstream, tempDir, writeConfig, type Upstream } from '../helpers/gateway.ts';
import { startWithRegistry, type RegistryGateway } from '../helpers/support.ts';

const GUIDE = join(PACKAGE_ROOT, 'docs/plugin-development.md');
const PDK = pathToFileURL(join(PACKAGE_ROOT, 'src/pdk/index.ts')).href;

/** The guide's block fenced as ```ts plugin, written where it can be imported from. */
async function guidePlugin(): Promise<PluginDefinition> {
  const block = /^```ts plugin\n([\s\S]*?)^```$/m.exec(readFileSync(GUIDE, 'utf8'));
  assert.ok(block, 'docs/plugin-development.md has a ```ts plugin block');
  const file = join(tempDir('tollgate-plugin-'), 'index.ts');
  writeFileSync(file, block[1].replace("'../../src/pdk/index.ts'", `'${PDK}'`));
  return (await import(pathToFileURL(file).href)).default;
}

const gatewayFile = (upstream: string, config: Record<string, unknown>) => ({
  services: [{ name: 'orders', url: upstream, routes: [{ name: 'orders', paths: ['/orders'], plugins: [{ name: 'api-version', config }] }] }],
});

let plugin: PluginDefinition;
let upstream: Upstream;
let gw: RegistryGateway;

before(async () => {
  plugin = await guidePlugin();
  upstream = await startUpstream();
  gw = await startWithRegistry(gatewayFile(upstream.url, { versions: ['2025-01', '2026-06'], fallback: '2026-06' }), new Map([...bundledPlugins, [plugin.name, plugin]]));
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
});

test('a version the route serves goes upstream, and comes back on the answer', async () => {
  const res = await request(`${gw.http}/orders`, { headers: { 'x-api-version': '2025-01' } });
  assert.equal(res.status, 200);
  assert.equal(res.json().headers['x-api-version'], '2025-01');
  assert.equal(res.headers['x-api-version'], '2025-01');
});

test('without the header, the fallback version is served', async () => {
  const res = await request(`${gw.http}/orders`);
  assert.equal(res.status, 200);
  assert.equal(res.json().headers['x-api-version'], '2026-06');
  assert.equal(res.headers['x-api-version'], '2026-06');
});

test('an unknown version is refused at the gateway', async () => {
  const before = upstream.requests.length;
  const res = await request(`${gw.http}/orders`, { headers: { 'x-api-version': '1999-12' } });
  assert.equal(res.status, 400);
  assert.equal(res.json().message, 'unknown API version: 1999-12');
  assert.equal(res.headers['x-api-version'], undefined);
  assert.equal(upstream.requests.length, before);
});

test('served requests are counted by version on /metrics', async () => {
  const metrics = (await request(`${gw.admin}/metrics`)).body.toString();
  assert.match(metrics, /^tollgate_api_version_requests(_total)?\{version="2025-01"\} 1$/m);
  assert.match(metrics, /^tollgate_api_version_requests(_total)?\{version="2026-06"\} 1$/m);
  assert.doesNotMatch(metrics, /version="1999-12"/);
});

test('its checkConfig refuses a fallback that is not one of the versions', async () => {
  const dataDir = tempDir();
  const file = writeConfig(gatewayFile(upstream.url, { versions: ['2025-01'], fallback: '2026-06' }), dataDir);
  await assert.rejects(Gateway.start(file, { registry: new Map([...bundledPlugins, [plugin.name, plugin]]) }), (err: Error) => {
    assert.ok(err instanceof ConfigLoadError);
    assert.match(err.message, /plugins\[0\]\.config\.fallback: must be one of the versions/);
    return true;
  });
});
