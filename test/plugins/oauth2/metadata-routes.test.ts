/**
 * Which routes publish RFC 8414 metadata at `/.well-known/oauth-authorization-server<prefix>`: exactly
 * those whose requests the oauth2 plugin runs on (the runtime's own plugin index decides, so an instance
 * scoped to a route AND a service that route does not belong to publishes nothing), with the route's hosts
 * compared as the router compares them (case, trailing dot, wildcards).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request } from '../../helpers/gateway.ts';

const oauth = { enable_client_credentials: true };
const WELL_KNOWN = '/.well-known/oauth-authorization-server';

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [
    {
      name: 'svc',
      url: upstreamUrl,
      routes: [
        { name: 'exact', paths: ['/exact'], hosts: ['API.Example'] },
        { name: 'wild', paths: ['/wild'], hosts: ['*.Wild.Example'] },
        { name: 'elsewhere', paths: ['/elsewhere'] },
      ],
    },
    { name: 'other', url: upstreamUrl },
  ],
  plugins: [
    { name: 'oauth2', route: 'exact', service: 'svc', config: oauth },
    { name: 'oauth2', route: 'wild', config: oauth },
    // Runs on nothing: route `elsewhere` belongs to `svc`, not to `other`.
    { name: 'oauth2', route: 'elsewhere', service: 'other', config: oauth },
  ],
}));

test('a route with the plugin publishes its metadata to any spelling of its host', async () => {
  for (const host of ['api.example', 'API.EXAMPLE', 'api.example.']) {
    const reply = await request(fx.gw.https + WELL_KNOWN + '/exact', { headers: { host } });
    assert.equal(reply.status, 200, `${host}: ${reply.text}`);
    assert.equal(reply.json().token_endpoint, `https://${host}/exact/oauth2/token`);
  }
  for (const host of ['a.wild.example', 'A.WILD.EXAMPLE.']) {
    const reply = await request(fx.gw.https + WELL_KNOWN + '/wild', { headers: { host } });
    assert.equal(reply.status, 200, `${host}: ${reply.text}`);
  }
});

test('a route the plugin never runs on publishes nothing', async () => {
  const proxied = await request(fx.gw.https + '/elsewhere/x');
  assert.equal(proxied.status, 200, 'the route is open: the mis-scoped instance does not run on it');
  const reply = await request(fx.gw.https + WELL_KNOWN + '/elsewhere');
  assert.equal(reply.status, 404, reply.text);
});
