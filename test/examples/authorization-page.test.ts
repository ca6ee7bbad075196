/**
 * The example authorization page end to end, in headless Chromium: the browser goes to the page's
 * /authorize, signs in, sees the application and its developer, approves, and lands on the client's
 * redirect_uri (a local server) with a code; the test then redeems the code at the token endpoint with its
 * PKCE verifier and calls the protected upstream. The gateway runs the example's gateway.yaml.
 * Without /usr/bin/chromium the browser cases skip; the plain HTTP checks of the page still run.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { parse } from 'yaml';
import { request, startGateway, startUpstream } from '../helpers/gateway.ts';

/** Debian's chromium (CHROMIUM_PATH overrides it, e.g. to check the skip). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const NO_CHROMIUM = 'chromium not installed: apt-get install chromium';
const ROOT = new URL('../../', import.meta.url).pathname;
const EXAMPLE = join(ROOT, 'examples/authorization-page');

const example = parse(readFileSync(join(EXAMPLE, 'gateway.yaml'), 'utf8'));
const plugin = example.services[0].routes[0].plugins[0].config;
const app = example.consumers[0].oauth2_credentials[0];
const developer = example.consumers[0].username;

let upstream: Awaited<ReturnType<typeof startUpstream>>;
let gw: Awaited<ReturnType<typeof startGateway>>;
let callback: { server: Server; url: string };
let page: { child: ChildProcess; url: string };
let browser: Browser;

/** The client application's redirect_uri: a real local server. */
async function startCallbackServer() {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('client app: callback received'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback` };
}

/** The page as an operator starts it (the command behind `npm run example:auth-page`). */
async function startPage(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(EXAMPLE, 'server.ts')], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      output += chunk;
      const found = /listening on (http:\/\/\S+)/.exec(output);
      if (found) resolve(found[1]);
    });
    child.stderr!.on('data', (chunk) => (output += chunk));
    child.once('exit', (code) => reject(new Error(`authorization page exited with ${code}: ${output}`)));
  });
  return { child, url };
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function authorizeUrl(params: Record<string, string>): string {
  return `${page.url}/authorize?${new URLSearchParams({ response_type: 'code', client_id: app.client_id, redirect_uri: callback.url, ...params })}`;
}

async function signIn(tab: Page, username = 'alice', password = 'wonderland') {
  await tab.fill('#username', username);
  await tab.fill('#password', password);
  await tab.click('#sign-in');
}

async function redeem(code: string, verifier: string) {
  return request(`${gw.https}/api/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      client_id: app.client_id,
      client_secret: app.client_secret,
      redirect_uri: callback.url,
      code_verifier: verifier,
    }).toString(),
  });
}

const haveChromium = existsSync(CHROMIUM);

describe('examples/authorization-page in headless Chromium', () => {
  before(async () => {
    upstream = await startUpstream();
    callback = await startCallbackServer();
    const config = structuredClone(example);
    delete config.gateway; // loopback listeners on free ports, a temp data dir
    config.services[0].url = upstream.url;
    config.consumers[0].oauth2_credentials[0].redirect_uris = [callback.url];
    gw = await startGateway(config);
    page = await startPage({
      GATEWAY_URL: `${gw.https}/api`,
      ADMIN_URL: gw.admin,
      PROVISION_KEY: plugin.provision_key,
      GATEWAY_CA_FILE: join(gw.dataDir, 'tls', 'gateway.crt'),
      USERS: 'alice:wonderland,bob:builder',
      PORT: '0',
    });
    if (!haveChromium) return;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  after(async () => {
    await browser?.close();
    page?.child.kill('SIGTERM');
    await gw?.stop();
    await upstream?.close();
    callback?.server.close();
  });

  it('sign in, approve, code, token, protected API', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      const { verifier, challenge } = pkce();
      const state = randomBytes(8).toString('hex');
      await tab.goto(authorizeUrl({ scope: 'orders:read', state, code_challenge: challenge, code_challenge_method: 'S256' }));
      await signIn(tab);

      assert.equal(await tab.textContent('#app-name'), app.name);
      assert.equal(await tab.textContent('#developer-name'), developer);
      assert.equal(await tab.textContent('#user-name'), 'alice');
      assert.match((await tab.textContent('.scopes')) ?? '', /orders:read/);

      await Promise.all([tab.waitForURL(`${callback.url}?**`), tab.click('#approve')]);
      const landed = new URL(tab.url());
      assert.equal(landed.searchParams.get('state'), state);
      const code = landed.searchParams.get('code');
      assert.ok(code, `no code in ${landed}`);
      assert.match((await tab.textContent('body')) ?? '', /callback received/);

      const token = await redeem(code, verifier);
      assert.equal(token.status, 200, token.text);
      const { access_token, scope, refresh_token } = token.json();
      assert.equal(scope, 'orders:read');
      assert.ok(refresh_token);

      const api = await request(`${gw.https}/api/orders`, { headers: { authorization: `Bearer ${access_token}` } });
      assert.equal(api.status, 200, api.text);
      const seen = api.json();
      assert.equal(seen.path, '/orders');
      assert.equal(seen.headers['x-authenticated-userid'], 'alice');
      assert.equal(seen.headers['x-consumer-username'], developer);
      assert.equal(seen.headers['x-credential-identifier'], app.client_id);
      assert.equal(seen.headers['x-authenticated-scope'], 'orders:read');

      // The code was for this verifier and is single-use.
      assert.equal((await redeem(code, verifier)).json().error, 'invalid_grant');
    } finally {
      await context.close();
    }
  });

  it('a signed-in user goes straight to the consent page; deny sends access_denied to the client', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      await tab.goto(authorizeUrl({ scope: 'orders:read', state: 'first', code_challenge: pkce().challenge, code_challenge_method: 'S256' }));
      await signIn(tab, 'bob', 'builder');
      assert.equal(await tab.textContent('#user-name'), 'bob');

      await tab.goto(authorizeUrl({ scope: 'orders:write', state: 'second', code_challenge: pkce().challenge, code_challenge_method: 'S256' }));
      assert.equal(await tab.textContent('#app-name'), app.name);
      await Promise.all([tab.waitForURL(`${callback.url}?**`), tab.click('#deny')]);
      const landed = new URL(tab.url());
      assert.equal(landed.searchParams.get('error'), 'access_denied');
      assert.equal(landed.searchParams.get('state'), 'second');
      assert.equal(landed.searchParams.get('code'), null);
    } finally {
      await context.close();
    }
  });

  it('a wrong password keeps the user on the sign-in form', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      await tab.goto(authorizeUrl({ scope: 'orders:read', code_challenge: pkce().challenge, code_challenge_method: 'S256' }));
      await signIn(tab, 'alice', 'not-the-password');
      assert.match((await tab.textContent('[role=alert]')) ?? '', /Wrong username or password/);
      assert.equal(await tab.locator('#approve').count(), 0);
    } finally {
      await context.close();
    }
  });

  it('gateway errors reach the client: no PKCE challenge with pkce strict', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      await tab.goto(authorizeUrl({ scope: 'orders:read', state: 's1' }));
      await signIn(tab);
      await Promise.all([tab.waitForURL(`${callback.url}?**`), tab.click('#approve')]);
      const landed = new URL(tab.url());
      assert.equal(landed.searchParams.get('error'), 'invalid_request');
      assert.equal(landed.searchParams.get('state'), 's1');
    } finally {
      await context.close();
    }
  });

  it('unknown applications and unregistered redirect URIs get an error page, never a redirect', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      const unknown = await tab.goto(authorizeUrl({ client_id: 'nobody' }));
      assert.equal(unknown?.status(), 400);
      assert.match((await tab.textContent('[role=alert]')) ?? '', /not registered/);
      const evil = await tab.goto(authorizeUrl({ redirect_uri: 'http://127.0.0.1:9/steal' }));
      assert.equal(evil?.status(), 400);
      assert.ok(tab.url().startsWith(page.url), tab.url());
      assert.match((await tab.textContent('[role=alert]')) ?? '', /redirect_uri is not registered/);
    } finally {
      await context.close();
    }
  });

  // Plain HTTP checks of the page: they run with or without Chromium.
  it('a consent form posted without the session cookie is refused (CSRF)', async () => {
    const res = await request(`${page.url}/consent`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'request=x&csrf=y&decision=approve',
    });
    assert.equal(res.status, 400);
    assert.equal(res.headers['location'], undefined);
  });

  it('bad authorization requests get a 400 page with the security headers, never a redirect', async () => {
    for (const query of ['', `client_id=${app.client_id}&scope=${'x'.repeat(5000)}`, 'client_id=nobody']) {
      const res = await request(`${page.url}/authorize?${query}`);
      assert.equal(res.status, 400, `${query.slice(0, 40)}: ${res.text}`);
      assert.equal(res.headers['location'], undefined);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
    }
  });

  it('an unsupported response_type goes back to the registered redirect_uri as an OAuth error', async () => {
    const res = await request(authorizeUrl({ response_type: 'token', state: 'st' }));
    assert.equal(res.status, 303);
    const location = new URL(String(res.headers['location']));
    assert.equal(location.origin + location.pathname, callback.url);
    assert.equal(location.searchParams.get('error'), 'unsupported_response_type');
    assert.equal(location.searchParams.get('state'), 'st');
  });

  it('the consent page escapes the scopes it lists (sign-in by plain HTTP, cookies by hand)', async () => {
    const entry = await request(authorizeUrl({ scope: 'orders:read <script>alert(1)</script>' }));
    assert.equal(entry.status, 200, entry.text);
    const hidden = (name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(entry.text)![1];
    const cookieOf = (res: typeof entry) => String(res.headers['set-cookie']).split(';')[0];
    const login = await request(`${page.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookieOf(entry) },
      body: new URLSearchParams({ request: hidden('request'), csrf: hidden('csrf'), username: 'alice', password: 'wonderland' }).toString(),
    });
    assert.equal(login.status, 303, login.text);
    assert.notEqual(cookieOf(login), cookieOf(entry), 'a new session id after sign-in');
    const consent = await request(`${page.url}${login.headers['location']}`, { headers: { cookie: cookieOf(login) } });
    assert.equal(consent.status, 200, consent.text);
    assert.match(consent.text, /&#60;script&#62;alert\(1\)&#60;\/script&#62;/);
    assert.ok(!consent.text.includes('<script>'), 'unescaped markup in the consent page');
  });
});
