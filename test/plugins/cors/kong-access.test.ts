/**
 * Kong's cors catalogue (spec/03-plugins/13-cors/01-access_spec.lua, 02-schema_spec.lua) against a real
 * gateway and upstream: the table of origin entries (plain, regex, with and without scheme and port) and
 * the origins they accept; preflight defaults, config options, preflight_continue, requested headers,
 * private networks; CORS headers on proxied answers, on a failing upstream, on another plugin's 401 and on
 * 404s; Vary kept beside the upstream's; the upstream's Access-Control-Allow-Origin removed when the origin
 * does not match; allow_origin_absent; and the schema.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { closedPort } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const DEFAULT_METHODS = 'GET,HEAD,PUT,PATCH,POST,DELETE,OPTIONS,TRACE,CONNECT';
const REQUEST_ORIGINS = [
  'http://evil.test', 'http://foo.test', 'http://foo.test.evil.test', 'http://something.foo.test', 'http://evilfoo.test', 'http://foo.test:80',
  'http://foo.test:8000', 'https://foo.test:8000', 'http://foo.test:90', 'http://foobtest', 'https://bar.test:1234',
];

/** Kong's regex_testcases: for each origins config, what each request origin gets (true: itself; a string: that; false: none). */
const REGEX_CASES: { origins: string[]; accept: Record<string, string | boolean> }[] = [
  { origins: ['foo.test'], accept: Object.fromEntries(REQUEST_ORIGINS.map((o) => [o, 'foo.test'])) },
  { origins: ['https://bar.test:1234'], accept: Object.fromEntries(REQUEST_ORIGINS.map((o) => [o, 'https://bar.test:1234'])) },
  { origins: ['foo\\.test'], accept: { 'http://foo.test': true, 'http://foo.test:80': 'http://foo.test', 'http://foo.test:8000': true, 'https://foo.test:8000': true, 'http://foo.test:90': true } },
  { origins: ['(.*[./])?foo\\.test'], accept: { 'http://foo.test': true, 'http://something.foo.test': true, 'http://foo.test:80': 'http://foo.test', 'http://foo.test:8000': true, 'https://foo.test:8000': true, 'http://foo.test:90': true } },
  { origins: ['(.*[./])?foo\\.test:8000'], accept: { 'http://foo.test:8000': true, 'https://foo.test:8000': true } },
  { origins: ['https://(.*[.])?foo\\.test:8000'], accept: { 'https://foo.test:8000': true } },
  { origins: ['^http://(.*[.])?foo\\.test(:(80|90))?$'], accept: { 'http://foo.test': true, 'http://something.foo.test': true, 'http://foo.test:80': 'http://foo.test', 'http://foo.test:90': true } },
  { origins: ['foo.test', 'bar.test'], accept: {} },
  { origins: ['http://foo.test', 'https://bar.test:1234'], accept: { 'http://foo.test': true, 'http://foo.test:80': 'http://foo.test', 'https://bar.test:1234': true } },
  { origins: ['bar.test', 'foo\\.test'], accept: { 'http://foo.test': true, 'http://foo.test:80': 'http://foo.test', 'http://foo.test:8000': true, 'https://foo.test:8000': true, 'http://foo.test:90': true } },
  { origins: ['bar.test', '(.*\\.)?foo\\.test'], accept: { 'http://foo.test': true, 'http://something.foo.test': true, 'http://foo.test:80': 'http://foo.test', 'http://foo.test:8000': true, 'https://foo.test:8000': true, 'http://foo.test:90': true } },
  { origins: ['bar.test', '(.*[./])?foo\\.test:8000'], accept: { 'http://foo.test:8000': true, 'https://foo.test:8000': true } },
  { origins: ['bar.test', 'https://(.*\\.)?foo\\.test:8000'], accept: { 'https://foo.test:8000': true } },
];

const cors = (config: Record<string, unknown> = {}) => ({ name: 'cors', config });
const ABSENT = ['absent', 'empty'] as const;

describe('cors (access)', () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    // Kong's mock upstream: /response-headers?name=value answers with those headers, anything else echoes.
    upstream = await startUpstream((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const echo = JSON.stringify({ method: req.method, headers: req.headers });
      if (url.pathname === '/response-headers') for (const [k, v] of url.searchParams) res.setHeader(k, v);
      if (url.pathname === '/status/201') res.statusCode = 201;
      if (url.pathname === '/asdasdasd') res.statusCode = 404;
      res.setHeader('content-type', 'application/json');
      res.end(echo);
    });
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const configured: [string, unknown[]][] = [
      ['cors1.test', [cors()]],
      ['cors2.test', [cors({ origins: ['example.test'], methods: ['GET'], headers: ['origin', 'type', 'accepts'], exposed_headers: ['x-auth-token'], max_age: 23, credentials: true })]],
      ['cors3.test', [cors({ origins: ['example.test'], methods: ['GET'], headers: ['origin', 'type', 'accepts'], exposed_headers: ['x-auth-token'], max_age: 23, preflight_continue: true })]],
      ['cors4.test', [cors(), { name: 'oauth2', config: { enable_client_credentials: true, accept_http_if_already_terminated: true } }]],
      ['cors5.test', [cors({ origins: ['*'], credentials: true })]],
      ['cors6.test', [cors({ origins: ['example.test', 'example.org'], methods: ['GET'], headers: ['origin', 'type', 'accepts'], exposed_headers: ['x-auth-token'], max_age: 23, preflight_continue: true })]],
      ['cors7.test', [cors({ origins: ['*'], credentials: false })]],
      ['cors-empty-origins.test', [cors({ origins: [] })]],
      ['cors9.test', [cors({ origins: ['.*\\.?example(?:-foo)?.test'] })]],
      ['cors10.test', [cors({ origins: ['http://my-site.test', 'http://my-other-site.test'] })]],
      ['cors11.test', [cors({ origins: ['http://my-site.test', 'https://my-other-site.test:9000'] })]],
      ['cors12.test', [cors({ credentials: true, preflight_continue: false, max_age: 1728000, headers: ['DNT', 'X-CustomHeader', 'Keep-Alive', 'User-Agent', 'X-Requested-With', 'If-Modified-Since', 'Cache-Control', 'Content-Type', 'Authorization'], methods: null, origins: ['a.xxx.test', 'allowed-domain.test'] })]],
      ['cors13.test', [cors({ preflight_continue: false, private_network: true, origins: ['allowed-domain.test'] })]],
      ['cors14.test', [cors({ preflight_continue: false, origins: ['foo.bar', '*'] })]],
      ['cors15.test', [cors({ allow_origin_absent: false, origins: ['foo.bar'], exposed_headers: ['x-auth-token'], credentials: true })]],
      ['cors16.test', [cors({ allow_origin_absent: true, origins: ['foo.bar'], exposed_headers: ['x-auth-token'], credentials: true })]],
      ...REGEX_CASES.map((c, i): [string, unknown[]] => [`cors-regex-${i + 1}.test`, [cors({ origins: c.origins })]]),
    ];
    const timeoutConfig = { origins: ['example.test'], methods: ['GET'], headers: ['origin', 'type', 'accepts'], exposed_headers: ['x-auth-token'], max_age: 10, preflight_continue: true };
    gw = await startGateway({
      services: [
        { name: 'mock', url: upstream.url, routes: configured.map(([host, plugins], i) => ({ name: `r${i}`, hosts: [host], plugins })) },
        { name: 'dead', url: dead, retries: 0, routes: [{ name: 'timeout', hosts: ['cors-timeout.test'], plugins: [cors(timeoutConfig)] }] },
      ],
    });
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  const send = (method: string, host: string, headers: Record<string, string> = {}, path = '/anything') => request(gw.http + path, { method, headers: { host, ...headers } });
  const preflight = (host: string, headers: Record<string, string> = {}) => send('OPTIONS', host, { 'access-control-request-method': 'GET', ...headers });
  const absent = (res: Reply, ...names: string[]) => {
    for (const name of names) assert.equal(res.headers[name], undefined, name);
  };

  describe('HTTP method: OPTIONS', () => {
    for (const [i, testcase] of REGEX_CASES.entries()) {
      test(`origins ${JSON.stringify(testcase.origins)}: the origins it accepts`, async () => {
        for (const origin of [...REQUEST_ORIGINS].sort()) {
          const accept = testcase.accept[origin] ?? false;
          const res = await preflight(`cors-regex-${i + 1}.test`, { origin });
          assert.equal(res.status, 200);
          if (accept) {
            assert.equal(res.headers['access-control-allow-methods'], DEFAULT_METHODS);
            assert.equal(res.headers['access-control-allow-origin'], accept === true ? origin : accept, origin);
            absent(res, 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age');
          } else {
            assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
          }
        }
      });
    }

    test('gives appropriate defaults', async () => {
      const res = await preflight('cors1.test', { origin: 'origin1.test' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-length'], '0');
      assert.equal(res.headers['access-control-allow-methods'], DEFAULT_METHODS);
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age', 'vary');
    });

    test('gives * wildcard when config.origins is empty', async () => {
      const res = await preflight('cors-empty-origins.test', { origin: 'empty-origin.test' });
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age', 'vary');
    });

    test('gives appropriate defaults when origin is explicitly set to * and config.credentials=true', async () => {
      const res = await preflight('cors5.test', { origin: 'origin5.test' });
      assert.equal(res.headers['access-control-allow-methods'], DEFAULT_METHODS);
      assert.equal(res.headers['access-control-allow-origin'], 'origin5.test');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.equal(res.headers.vary, 'Origin');
      absent(res, 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-max-age');
    });

    test('gives * wildcard when origin has multiple entries and have * included', async () => {
      const res = await preflight('cors14.test', { origin: 'http://www.example.net' });
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age');
    });

    test('accepts config options', async () => {
      const res = await preflight('cors2.test', { origin: 'origin5.test' });
      assert.equal(res.headers['content-length'], '0');
      assert.equal(res.headers['access-control-allow-methods'], 'GET');
      assert.equal(res.headers['access-control-allow-origin'], 'example.test');
      assert.equal(res.headers['access-control-max-age'], '23');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.equal(res.headers['access-control-allow-headers'], 'origin,type,accepts');
      assert.equal(res.headers.vary, 'Origin');
      absent(res, 'access-control-expose-headers');
    });

    test('preflight_continue enabled', async () => {
      const res = await send('OPTIONS', 'cors3.test', { origin: 'origin5.test', 'access-control-request-method': 'GET' }, '/status/201');
      assert.equal(res.status, 201);
      assert.equal(res.json().method, 'OPTIONS');
    });

    test('replies with request-headers if present in request', async () => {
      const res = await preflight('cors5.test', { origin: 'origin5.test', 'access-control-request-headers': 'origin,accepts' });
      assert.equal(res.headers['content-length'], '0');
      assert.equal(res.headers['access-control-allow-headers'], 'origin,accepts');
    });

    test('properly validates flat strings', async () => {
      assert.equal((await preflight('cors10.test', { origin: 'http://my-site.test' })).headers['access-control-allow-origin'], 'http://my-site.test');
      assert.equal((await preflight('cors10.test', { origin: 'http://bad-guys.test' })).headers['access-control-allow-origin'], undefined);
      assert.equal((await preflight('cors10.test', { origin: 'http://my-site.test.bad-guys.test' })).headers['access-control-allow-origin'], undefined);
    });

    test('support private-network', async () => {
      const res = await send('OPTIONS', 'cors13.test', { origin: 'allowed-domain.test', 'access-control-request-private-network': 'true', 'access-control-request-method': 'PUT' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['access-control-allow-private-network'], 'true');
    });
  });

  describe('HTTP method: others', () => {
    test('gives appropriate defaults', async () => {
      const res = await send('GET', 'cors1.test');
      assert.equal(res.status, 200);
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age', 'vary');
    });

    test('proxies a non-preflight OPTIONS request', async () => {
      const res = await send('OPTIONS', 'cors1.test');
      assert.equal(res.status, 200);
      assert.equal(res.json().method, 'OPTIONS');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-methods', 'access-control-allow-headers', 'vary');
    });

    test('accepts config options', async () => {
      const res = await send('GET', 'cors2.test');
      assert.equal(res.headers['access-control-allow-origin'], 'example.test');
      assert.equal(res.headers['access-control-expose-headers'], 'x-auth-token');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.equal(res.headers.vary, 'Origin');
      absent(res, 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-max-age');
    });

    test('works even when the upstream fails', async () => {
      const res = await send('GET', 'cors-timeout.test');
      assert.equal(res.status, 502);
      assert.equal(res.headers['access-control-allow-origin'], 'example.test');
      assert.equal(res.headers['access-control-expose-headers'], 'x-auth-token');
      assert.equal(res.headers.vary, 'Origin');
      absent(res, 'access-control-allow-credentials', 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-max-age');
    });

    test('works with 404 responses', async () => {
      const res = await send('GET', 'cors1.test', {}, '/asdasdasd');
      assert.equal(res.status, 404);
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-methods', 'vary');
    });

    test('works with 40x responses returned by another plugin', async () => {
      const res = await send('GET', 'cors4.test');
      assert.equal(res.status, 401);
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-expose-headers', 'access-control-allow-credentials', 'access-control-max-age', 'vary');
    });

    test('sets CORS orgin based on origin host', async () => {
      const res = await send('GET', 'cors6.test', { origin: 'example.test' });
      assert.equal(res.headers['access-control-allow-origin'], 'example.test');
      assert.equal(res.headers.vary, 'Origin');
      const domains: Record<string, boolean> = { 'example.test': true, 'www.example.test': true, 'example-foo.test': true, 'www.example-foo.test': true, 'www.example-fo0.test': false };
      for (const [domain, allowed] of Object.entries(domains)) {
        const r = await send('GET', 'cors9.test', { origin: domain });
        assert.equal(r.headers['access-control-allow-origin'], allowed ? domain : undefined, domain);
        assert.equal(r.headers.vary, 'Origin');
      }
    });

    test("sets Vary and don't override existing Vary header", async () => {
      const res = await send('GET', 'cors2.test', { origin: 'example.test' }, '/response-headers?vary=Accept-Encoding');
      assert.equal(res.headers.vary, 'Accept-Encoding, Origin');
    });

    test('does not automatically parse the host', async () => {
      assert.equal((await send('GET', 'cors6.test', { origin: 'http://example.test' })).headers['access-control-allow-origin'], undefined);
      assert.equal((await send('GET', 'cors6.test', { origin: 'https://example.test' })).headers['access-control-allow-origin'], undefined);
    });

    test('validates scheme and port', async () => {
      const acao = async (origin: string) => (await send('GET', 'cors11.test', { origin })).headers['access-control-allow-origin'];
      assert.equal(await acao('http://my-site.test'), 'http://my-site.test');
      assert.equal(await acao('http://my-site.test:80'), 'http://my-site.test');
      assert.equal(await acao('http://my-site.test:8000'), undefined);
      assert.equal(await acao('https://my-site.test'), undefined);
      assert.equal(await acao('https://my-other-site.test:9000'), 'https://my-other-site.test:9000');
      assert.equal(await acao('https://my-other-site.test:9001'), undefined);
    });

    test('does not sets CORS origin if origin host is not in origin_domains list', async () => {
      assert.equal((await send('GET', 'cors6.test', { origin: 'http://www.example.net' })).headers['access-control-allow-origin'], undefined);
    });

    test('responds with the requested Origin when config.credentials=true', async () => {
      for (const origin of ['http://www.example.net', 'http://www.example.net:3000']) {
        const res = await send('GET', 'cors5.test', { origin });
        assert.equal(res.headers['access-control-allow-origin'], origin);
        assert.equal(res.headers['access-control-allow-credentials'], 'true');
        assert.equal(res.headers.vary, 'Origin');
      }
    });

    test('responds with * when origin is explicitly set to * and config.credentials=false', async () => {
      const res = await send('GET', 'cors7.test', { origin: 'http://www.example.net' });
      assert.equal(res.headers['access-control-allow-origin'], '*');
      absent(res, 'access-control-allow-credentials', 'vary');
    });

    test('responds with * when origin has multiple entries and have * included', async () => {
      assert.equal((await send('GET', 'cors14.test', { origin: 'http://www.example.net' })).headers['access-control-allow-origin'], '*');
    });

    test('removes upstream ACAO header when no match is found', async () => {
      const path = '/response-headers?Response-Header=is-added&Access-Control-Allow-Origin=*';
      const allowed = await send('GET', 'cors12.test', { origin: 'allowed-domain.test' }, path);
      assert.equal(allowed.headers['response-header'], 'is-added');
      assert.equal(allowed.headers['access-control-allow-origin'], 'allowed-domain.test');
      assert.equal(allowed.headers['access-control-allow-credentials'], 'true');
      assert.equal(allowed.headers.vary, 'Origin');
      assert.equal(allowed.json().headers.origin, 'allowed-domain.test');
      const refused = await send('GET', 'cors12.test', { origin: 'disallowed-domain.test' }, path);
      assert.equal(refused.headers['response-header'], 'is-added');
      assert.equal(refused.headers['access-control-allow-origin'], undefined);
      assert.equal(refused.headers['access-control-allow-credentials'], 'true');
    });

    for (const origin of ABSENT) {
      const headers: Record<string, string> = origin === 'empty' ? { origin: '' } : {};
      test(`when allow_origin_absent is disabled with missing Origin header value (${origin}), no ACAO is returned`, async () => {
        const res = await rawGet(gw.http, 'cors15.test', headers);
        absent(res, 'access-control-allow-origin', 'access-control-allow-credentials', 'access-control-expose-headers', 'vary');
      });
      test(`when allow_origin_absent is enabled with missing Origin header value (${origin}), ACAO is returned`, async () => {
        const res = await rawGet(gw.http, 'cors16.test', headers);
        assert.equal(res.headers['access-control-allow-origin'], 'foo.bar');
        assert.equal(res.headers['access-control-allow-credentials'], 'true');
        assert.equal(res.headers['access-control-expose-headers'], 'x-auth-token');
        assert.equal(res.headers.vary, 'Origin');
      });
    }
  });
});

/** A GET that can carry an empty Origin header (the shared client drops nothing, but be explicit). */
function rawGet(base: string, host: string, headers: Record<string, string>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/anything`, { headers: { host, ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString(), json: () => JSON.parse(body.toString()) });
      });
    });
    req.on('error', reject);
  });
}

describe('cors (schema)', () => {
  const check = (config: Record<string, unknown>) => pluginConfigErrors('cors', config);
  test('validates "*"', async () => assert.deepEqual(await check({ origins: ['*'] }), []));
  test('validates what looks like a domain', async () => assert.deepEqual(await check({ origins: ['example.com'] }), []));
  test('validates what looks like a regex', async () => assert.deepEqual(await check({ origins: ['[a-z]+.example.com'] }), []));
  test('errors with invalid regex in origins', async () => {
    assert.deepEqual(await check({ origins: ['[a-z]+.example.com', '[a-z'] }), ["config.origins[1]: '[a-z' is not a valid regex (missing closing ]: `[a-z`, at position 0)"]);
  });
  test('refuses what the linear-time engine cannot run, with its position; nested quantifiers run in linear time', async () => {
    assert.deepEqual(await check({ origins: ['https://(?!evil)[a-z]+.example.com'] }), [
      "config.origins[0]: 'https://(?!evil)[a-z]+.example.com' is not a valid regex (a negative lookahead is not supported by the linear-time engine (RE2), at position 8)",
    ]);
    assert.deepEqual(await check({ origins: ['(a+)+.example.com'] }), []);
  });
  test('a regex that compiles as written but not once anchored (Kong anchors it) refuses the configuration', async () => {
    assert.deepEqual(await check({ origins: ['^*'] }), ["config.origins[0]: '^*' is not a valid regex (missing argument to repetition operator: `*`, at position 0)"]);
  });
  test('methods must be HTTP methods', async () => {
    assert.deepEqual(await check({ methods: ['GET', 'FETCH'] }), ['config.methods[1]: expected one of: GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS, TRACE, CONNECT']);
  });
});

describe('cors (abuse)', () => {
  test('an Origin longer than any real origin matches nothing (a regex never runs over it)', async () => {
    const upstream = await startUpstream();
    const gw = await startGateway({ services: [{ name: 's', url: upstream.url, routes: [{ name: 'r', paths: ['/'], plugins: [cors({ origins: ['(.*[./])?a.*b.*c.*example\\.test'] })] }] }] });
    try {
      const res = await request(`${gw.http}/`, { headers: { origin: `http://${'a'.repeat(600)}.abc.example.test` } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['access-control-allow-origin'], undefined);
      const ok = await request(`${gw.http}/`, { headers: { origin: 'http://x.abc.example.test' } });
      assert.equal(ok.headers['access-control-allow-origin'], 'http://x.abc.example.test');
    } finally {
      await gw.stop();
      await upstream.close();
    }
  });
});
