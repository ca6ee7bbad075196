/**
 * Kong's plugin config schema cases (reference §7.14): errors through `npm run check`, defaults
 * through the admin API's `GET /plugins`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { startGateway, startUpstream, tempDir, tollgateArgs } from '../../helpers/gateway.ts';
import { admin } from './kong-fixture.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;
const AT_LEAST_ONE =
  'at least one of these fields must be true: enable_authorization_code, enable_implicit_grant, enable_client_credentials, enable_password_grant';

function configWith(pluginConfig: Record<string, unknown>, host = 'schema.test') {
  return {
    _format_version: '3.0',
    services: [
      {
        name: `svc-${host}`,
        url: 'http://127.0.0.1:9',
        routes: [{ name: `route-${host}`, hosts: [host], plugins: [{ name: 'oauth2', config: pluginConfig }] }],
      },
    ],
  };
}

/** Runs `tollgate check --config FILE` (what `npm run check` runs) on the plugin config. */
function check(pluginConfig: Record<string, unknown>): { status: number | null; output: string } {
  const dir = tempDir('oauth2-schema-');
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify(configWith(pluginConfig)));
  const run = spawnSync(process.execPath, tollgateArgs('check', '--config', file), { cwd: ROOT, encoding: 'utf8' });
  return { status: run.status, output: run.stdout + run.stderr };
}

function assertRejected(pluginConfig: Record<string, unknown>, field: string, message: string) {
  const { status, output } = check(pluginConfig);
  assert.equal(status, 1, output);
  const escaped = (field + ': ' + message).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  assert.match(output, new RegExp(`gateway\\.yaml:\\d+:\\d+: \\S*${escaped}`), output);
}

describe('Kong §7.14 config schema: validation', () => {
  it('SC01 authorization code without mandatory scope is valid', () => {
    const { status, output } = check({ enable_authorization_code: true, mandatory_scope: false });
    assert.equal(status, 0, output);
  });

  it('SC02 mandatory scope with scopes is valid', () => {
    const { status, output } = check({ enable_authorization_code: true, mandatory_scope: true, scopes: ['email', 'info'] });
    assert.equal(status, 0, output);
  });

  it('SC08 refresh_token_ttl is bounded', () => {
    assertRejected({ enable_authorization_code: true, refresh_token_ttl: 252979200 }, 'config.refresh_token_ttl', 'value should be between 0 and 100000000');
  });

  it('SC10 at least one grant must be enabled', () => {
    assertRejected({}, 'config', AT_LEAST_ONE);
  });

  it('SC11 mandatory scope needs scopes', () => {
    assertRejected({ enable_authorization_code: true, mandatory_scope: true }, 'config.scopes', 'required field missing');
  });

  it('SC11b persistent_refresh_token does not exist (Kong #8348)', () => {
    assertRejected({ enable_authorization_code: true, persistent_refresh_token: true }, 'config.persistent_refresh_token', 'unknown field');
  });

  it('SC11c pkce is one of none, lax, strict', () => {
    const { status, output } = check({ enable_authorization_code: true, pkce: 'sometimes' });
    assert.equal(status, 1, output);
    assert.match(output, /config\.pkce: expected one of: none, lax, strict/);
  });

  it('SC12 oauth2_tokens DAO insert validation', { skip: "Kong's DAO validate_insert without defaults has no counterpart (POST /oauth2_tokens applies defaults)" }, () => {});
  it('SC13 deleting a service cascades to its tokens', { skip: 'services are declared in gateway.yaml; there is no service DELETE' }, () => {});
});

describe('Kong §7.14 config schema: defaults (GET /plugins)', () => {
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let gw: Awaited<ReturnType<typeof startGateway>>;
  const hosts = ['defaults.test', 'custom.test'];
  const config = () => {
    const base = configWith({ enable_authorization_code: true, mandatory_scope: true, scopes: ['email', 'info'] }, hosts[0]);
    const custom = configWith({ enable_authorization_code: true, provision_key: 'hello', auth_header_name: 'custom_header_name' }, hosts[1]);
    base.services.push(...custom.services);
    return base;
  };
  before(async () => {
    upstream = await startUpstream();
    gw = await startGateway(config());
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  async function pluginConfigs(): Promise<Record<string, any>[]> {
    const res = await admin(gw, 'GET', '/plugins');
    assert.equal(res.status, 200, res.text);
    const routes = (await admin(gw, 'GET', '/routes')).json().data as any[];
    const byRoute = (name: string) => routes.find((r) => r.name === name).id;
    const plugins = res.json().data as any[];
    return hosts.map((host) => plugins.find((p) => p.name === 'oauth2' && p.route?.id === byRoute(`route-${host}`)).config);
  }

  it('SC03 a provision_key of 32 characters is generated', async () => {
    const [defaults] = await pluginConfigs();
    assert.match(defaults.provision_key, /^[A-Za-z0-9]{32}$/);
  });

  it('SC03b the generated provision_key is stable across restarts (Kong keeps it in its database)', async () => {
    const [before] = await pluginConfigs();
    const dataDir = gw.dataDir;
    await gw.stop();
    gw = await startGateway(config(), { dataDir });
    const [afterRestart] = await pluginConfigs();
    assert.equal(afterRestart.provision_key, before.provision_key);
  });

  it('SC04 a given provision_key is kept', async () => {
    assert.equal((await pluginConfigs())[1].provision_key, 'hello');
  });

  it('SC05 auth_header_name defaults to authorization', async () => {
    assert.equal((await pluginConfigs())[0].auth_header_name, 'authorization');
  });

  it('SC06 a custom auth_header_name is kept', async () => {
    assert.equal((await pluginConfigs())[1].auth_header_name, 'custom_header_name');
  });

  it('SC07 refresh_token_ttl defaults to 14 days', async () => {
    assert.equal((await pluginConfigs())[0].refresh_token_ttl, 1209600);
  });

  it('SC09 reuse_refresh_token defaults to false', async () => {
    assert.equal((await pluginConfigs())[0].reuse_refresh_token, false);
  });

  it('SC14 the other defaults of §1', async () => {
    const [defaults] = await pluginConfigs();
    assert.equal(defaults.token_expiration, 7200);
    assert.equal(defaults.pkce, 'lax');
    assert.equal(defaults.enable_implicit_grant, false);
    assert.equal(defaults.enable_client_credentials, false);
    assert.equal(defaults.enable_password_grant, false);
    assert.equal(defaults.hide_credentials, false);
    assert.equal(defaults.global_credentials, false);
    assert.equal(defaults.accept_http_if_already_terminated, false);
  });
});
