/**
 * Kong's global credentials cases (reference §7.8): tokens issued by a plugin with `global_credentials` work on
 * every other global plugin, and nowhere else; service-bound tokens stay on their service.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GOOGLE, PROVISION_KEY, assertInvalidToken, kongFixtureAroundTests } from './kong-fixture.ts';

const GLOBAL_MISMATCH = "The access token is global, but the current plugin is configured without 'global_credentials'";

const fx = kongFixtureAroundTests((config) => {
  // GL04 (Kong regression #4232): a global code route and a non-global client_credentials route.
  const service = (name: string, host: string, pluginConfig: Record<string, unknown>) => ({
    name,
    url: config.services[0].url,
    routes: [{ name: `route-${name}`, hosts: [host], protocols: ['http', 'https'], plugins: [{ name: 'oauth2', config: pluginConfig }] }],
  });
  config.services.push(
    service('regression-4232-a', 'oauth2_regression_4232.test', {
      provision_key: PROVISION_KEY,
      enable_authorization_code: true,
      global_credentials: true,
    }),
    service('regression-4232-b', 'oauth2_regression_4232_test.test', { enable_client_credentials: true, global_credentials: false }),
  );
  config.consumers.push({
    username: '4232',
    oauth2_credentials: [{ name: 'app-4232', client_id: 'clientid_4232', client_secret: 'secret_4232', redirect_uris: [GOOGLE] }],
  });
});

const bearer = (host: string, token: string) => fx.client.proxy('/request', { host, headers: { authorization: `bearer ${token}` } });

describe('Kong §7.8 global credentials', () => {
  it('GL01 a global token on a non-global plugin', async () => {
    const { access_token } = await fx.client.provisionToken({ host: 'oauth2_8.test' });
    assert.equal((await bearer('oauth2_8.test', access_token)).status, 200);
    assertInvalidToken(await bearer('oauth2.test', access_token), GLOBAL_MISMATCH);
  });

  it('GL02 a service-bound token on a global plugin', async () => {
    const { access_token } = await fx.client.provisionToken();
    assertInvalidToken(await bearer('oauth2_8.test', access_token));
    assert.equal((await bearer('oauth2.test', access_token)).status, 200);
  });

  it('GL03 a global token on two global plugins', async () => {
    const { access_token } = await fx.client.provisionToken({ host: 'oauth2_8.test' });
    assert.equal((await bearer('oauth2_8.test', access_token)).status, 200);
    assert.equal((await bearer('oauth2_9.test', access_token)).status, 200);
  });

  it('GL04 regression #4232: a global token in a JSON body at a non-global client_credentials plugin', async () => {
    const { access_token } = await fx.client.provisionToken({
      host: 'oauth2_regression_4232.test',
      clientId: 'clientid_4232',
      secret: 'secret_4232',
    });
    const res = await fx.client.proxy('/anything', { host: 'oauth2_regression_4232_test.test', method: 'POST', body: { json: { access_token } } });
    assertInvalidToken(res, GLOBAL_MISMATCH);
  });

  it('GL05 a global token even beats anonymous on a non-global plugin (Kong exits directly)', async () => {
    const { access_token } = await fx.client.provisionToken({ host: 'oauth2_8.test' });
    assertInvalidToken(await bearer('oauth2_7.test', access_token), GLOBAL_MISMATCH);
  });

  it('GL06 a global refresh token refreshes at another global plugin', async () => {
    const issued = await fx.client.provisionToken({ host: 'oauth2_8.test' });
    const refreshed = await fx.client.refresh(issued.refresh_token, 'oauth2_9.test');
    assert.equal((await bearer('oauth2_8.test', refreshed.access_token)).status, 200);
  });
});
