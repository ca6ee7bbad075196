/**
 * The oauth2 plugin on WebSocket handshakes, in the recommended setup (tokens issued on an https route with
 * `global_credentials`): a missing or bad token is refused with 401 before any upgrade; a token in the
 * `authorization` header or, for browsers, in the `access_token` query parameter opens the tunnel, and
 * `hide_credentials` keeps it from the upstream.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { CLIENT, issueToken, oauth2Plugin, tokenIssuerConfig } from '../../fixtures/oauth2-setup.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';

const deadline = () => ({ signal: AbortSignal.timeout(10_000) });

describe('oauth2 on WebSocket routes', () => {
  let upstream: WsEcho;
  let gw: TestGateway;
  let token: string;

  before(async () => {
    upstream = await startWsEcho();
    gw = await startGateway({
      ...tokenIssuerConfig(),
      services: [
        {
          name: 'chat',
          url: `ws://127.0.0.1:${upstream.port}`,
          routes: [{ name: 'chat', protocols: ['ws', 'wss'], paths: ['/chat'], plugins: [oauth2Plugin({ hide_credentials: true })] }],
        },
      ],
    });
    token = await issueToken(gw.https);
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test('tokens cannot be issued on a WebSocket route: its /oauth2/token is an invalid handshake (400)', async () => {
    const res = await request(`${gw.https}/chat/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', ...CLIENT }).toString(),
    });
    assert.equal(res.status, 400);
    assert.match(res.json().message, /Invalid WebSocket handshake/);
    assert.equal(res.json().access_token, undefined);
  });

  for (const scheme of ['ws', 'wss'] as const) {
    const url = (path: string) => (scheme === 'wss' ? gw.https : gw.http).replace(/^http/, 'ws') + path;

    async function refused(path: string, headers: Record<string, string> = {}): Promise<{ res: IncomingMessage; body: any }> {
      const before = upstream.handshakes.length;
      const ws = new WebSocket(url(path), { rejectUnauthorized: false, headers });
      ws.on('error', () => {});
      const [, res] = (await once(ws, 'unexpected-response', deadline())) as [unknown, IncomingMessage];
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c);
      assert.equal(upstream.handshakes.length, before, 'the upstream never saw the handshake');
      return { res, body: JSON.parse(Buffer.concat(chunks).toString()) };
    }

    async function opened(path: string, headers: Record<string, string> = {}): Promise<WebSocket> {
      const ws = new WebSocket(url(path), { rejectUnauthorized: false, headers });
      await once(ws, 'open', deadline());
      return ws;
    }

    test(`${scheme}: no token → 401 before any upgrade`, async () => {
      const { res, body } = await refused('/chat');
      assert.equal(res.statusCode, 401);
      assert.equal(body.error_description, 'The access token is missing');
      assert.match(String(res.headers['www-authenticate']), /^Bearer/);
    });

    test(`${scheme}: a bad token → 401 invalid_token`, async () => {
      const { res, body } = await refused('/chat', { authorization: 'Bearer nope' });
      assert.equal(res.statusCode, 401);
      assert.equal(body.error, 'invalid_token');
    });

    test(`${scheme}: a token in the authorization header opens the tunnel; the identity goes upstream, the token does not`, async () => {
      const before = upstream.handshakes.length;
      const ws = await opened('/chat', { authorization: `Bearer ${token}` });
      const handshake = upstream.handshakes[before];
      assert.equal(handshake.headers['x-consumer-username'], 'acme');
      assert.equal(handshake.headers['x-credential-identifier'], CLIENT.client_id);
      assert.equal(handshake.headers.authorization, undefined);
      const reply = once(ws, 'message', deadline());
      ws.send('hello');
      assert.equal(String((await reply)[0]), 'hello');
      ws.close();
    });

    test(`${scheme}: a browser's access_token query parameter works and is removed upstream`, async () => {
      const before = upstream.handshakes.length;
      const ws = await opened(`/chat/room?access_token=${encodeURIComponent(token)}&room=7`);
      const handshake = upstream.handshakes[before];
      assert.equal(handshake.url, '/room?room=7');
      assert.equal(handshake.headers['x-consumer-username'], 'acme');
      ws.close();
    });
  }
});
