/**
 * JSON nested too deeply, wherever the gateway parses JSON it did not write (issue 28, item 5). V8 parses
 * 400,000 nested arrays (800 KB) happily; what follows (JSON.stringify, a walk over the value) overflows the
 * stack, and the request used to end in a 500. Every such reader now refuses text nested deeper than
 * MAX_JSON_DEPTH (lua-cjson's limit, which Kong decodes bodies with) before parsing it, and treats it as it
 * treats malformed JSON there: request-transformer and response-transformer pass the body on untouched
 * (Kong's cjson.safe decode fails and the body goes as it came), request-termination echoes it unparsed,
 * oauth2 and jwt see no parameters or claims, the admin and metering APIs answer 400 saying why. JSON
 * nested exactly MAX_JSON_DEPTH deep still works everywhere. The gateway answers other requests alongside.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { JsonTooDeepError } from '../../../src/errors.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan, parseUntrustedJson } from '../../../src/toolkit/json.ts';
import { aroundTests, request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { assertProblem, CE_SINGLE, event, MeteringApi, ROUTE_PATH } from '../../plugins/metering/catalogue-support.ts';

/** `depth` nested arrays: `[[…]]`. */
const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
/** The issue's body: 400,000 nested arrays, 800 KB. */
const HUGE = nested(400_000);
const TOO_DEEP = nested(MAX_JSON_DEPTH + 1);
const AT_LIMIT = nested(MAX_JSON_DEPTH - 1); // inside an object: MAX_JSON_DEPTH levels in all

const CLIENT = { client_id: 'deep-app', client_secret: 'deep-secret' };
const JWT_SECRET = 'deep-jwt-secret';

describe('the depth scan', () => {
  test('counts arrays and objects, not brackets inside strings or escaped quotes', () => {
    assert.equal(nestsDeeperThan(nested(3), 3), false);
    assert.equal(nestsDeeperThan(nested(4), 3), true);
    assert.equal(nestsDeeperThan('{"a":{"b":[{}]}}', 3), true);
    assert.equal(nestsDeeperThan(`{"a":"${'['.repeat(50)}","b":"\\"${'{'.repeat(50)}"}`, 3), false);
    assert.equal(nestsDeeperThan(`["\\\\",${nested(3)}]`, 3), true, 'an escaped backslash ends before the quote');
    assert.equal(nestsDeeperThan(`[1],[2],[3],[4],[5],${'[1],'.repeat(100)}[0]`, 3), false, 'siblings are not depth');
  });

  test('parseUntrustedJson refuses too deep text as a SyntaxError with a stable code, and parses the rest', () => {
    assert.throws(() => parseUntrustedJson(TOO_DEEP), (err: unknown) => err instanceof SyntaxError && err instanceof JsonTooDeepError && err.code === 'TOLLGATE_ERR_JSON_TOO_DEEP');
    assert.equal(JSON.stringify(parseUntrustedJson(nested(MAX_JSON_DEPTH))), nested(MAX_JSON_DEPTH));
    assert.throws(() => parseUntrustedJson('{"a":'), SyntaxError);
  });
});

interface Fixture {
  gw: TestGateway;
  upstream: Upstream;
  deepUpstream: Upstream;
  close(): Promise<void>;
}

/** An upstream answering `{"kept":true,"deep":<text>}` with the text its request path names. */
function deepAnswering(): Promise<Upstream> {
  return startUpstream((req, res) => {
    const deep = req.url?.startsWith('/at-limit') ? AT_LIMIT : HUGE;
    res.writeHead(200, { 'content-type': 'application/json' }).end(`{"kept":true,"deep":${deep}}`);
  });
}

const fx = aroundTests<Fixture>(async () => {
  const upstream = await startUpstream();
  const deepUpstream = await deepAnswering();
  const gw = await startGateway({
    services: [
      {
        name: 'echo',
        url: upstream.url,
        routes: [
          { name: 'request-transformer', paths: ['/rt'], plugins: [{ name: 'request-transformer', config: { add: { body: ['added:yes'] } } }] },
          { name: 'request-termination', paths: ['/echo'], plugins: [{ name: 'request-termination', config: { echo: true, status_code: 200 } }] },
          { name: 'oauth2', paths: ['/oauth'], plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk', accept_http_if_already_terminated: true } }] },
          { name: 'jwt', paths: ['/jwt'], plugins: [{ name: 'jwt', config: {} }] },
        ],
      },
      { name: 'deep', url: deepUpstream.url, routes: [{ name: 'response-transformer', paths: ['/rs'], plugins: [{ name: 'response-transformer', config: { add: { json: ['added:yes'] } } }] }] },
    ],
    routes: [{ name: 'metering', paths: [ROUTE_PATH], protocols: ['http', 'https'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
    consumers: [{ username: 'deep', oauth2_credentials: [{ name: 'Deep', ...CLIENT }], jwt_secrets: [{ key: 'deep-key', secret: JWT_SECRET }] }],
  });
  return {
    gw,
    upstream,
    deepUpstream,
    async close() {
      await gw.stop();
      await upstream.close();
      await deepUpstream.close();
    },
  };
});

/** `deep` sent while ordinary requests run beside it: they are all answered, and so is `deep`. */
async function alongsideOthers(deep: () => Promise<Reply>): Promise<Reply> {
  const others = Array.from({ length: 4 }, () => request(`${fx.gw.http}/rt`, { method: 'POST', body: { n: 1 } }));
  const [reply, ...answered] = await Promise.all([deep(), ...others]);
  for (const other of answered) assert.equal(other.status, 200, other.text);
  return reply;
}

const postJson = (path: string, body: string, base = fx.gw.http): Promise<Reply> =>
  request(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

describe('bodies passed on: the proxy plugins', () => {
  test('request-transformer sends a too deep JSON body upstream untouched, as Kong does', async () => {
    const body = `{"a":${HUGE}}`;
    const reply = await alongsideOthers(() => postJson('/rt', body));
    assert.equal(reply.status, 200, reply.text.slice(0, 300));
    assert.equal(reply.json().body, body);
    const atLimit = await postJson('/rt', `{"a":${AT_LIMIT}}`);
    assert.deepEqual(JSON.parse(atLimit.json().body), { a: JSON.parse(AT_LIMIT), added: 'yes' }, 'at the limit the field is added');
  });

  test('response-transformer passes a too deep upstream answer on untouched', async () => {
    const reply = await alongsideOthers(() => request(`${fx.gw.http}/rs`));
    assert.equal(reply.status, 200);
    assert.equal(reply.text, `{"kept":true,"deep":${HUGE}}`);
    const atLimit = (await request(`${fx.gw.http}/rs/at-limit`)).json();
    assert.equal(atLimit.added, 'yes', 'at the limit the field is added');
  });

  test('request-termination echoes a too deep body as raw text, without parsing it', async () => {
    const body = `{"a":${HUGE}}`;
    const reply = await alongsideOthers(() => postJson('/echo', body));
    assert.equal(reply.status, 200, reply.text.slice(0, 300));
    const echoed = reply.json().request;
    assert.equal(echoed.raw_body, body);
    assert.equal(echoed.body, undefined);
    assert.deepEqual((await postJson('/echo', `{"a":${AT_LIMIT}}`)).json().request.body, { a: JSON.parse(AT_LIMIT) });
  });
});

describe('credentials in JSON: oauth2 and jwt read nothing from too deep JSON', () => {
  const tokenRequest = (extra: string) => postJson('/oauth/oauth2/token', `{"grant_type":"client_credentials","client_id":"${CLIENT.client_id}","client_secret":"${CLIENT.client_secret}","x":${extra}}`, fx.gw.https);

  test('an oauth2 token request in too deep JSON has no parameters: no token', async () => {
    const refused = await alongsideOthers(() => tokenRequest(TOO_DEEP));
    assert.ok(refused.status === 400 || refused.status === 401, refused.text);
    assert.equal(refused.json().access_token, undefined);
    const granted = await tokenRequest(AT_LIMIT);
    assert.equal(granted.status, 200, granted.text);
  });

  /** An HS256 token of consumer `deep` whose claims carry `extra`. */
  function jwtWith(extra: string): string {
    const part = (text: string) => Buffer.from(text).toString('base64url');
    const input = `${part('{"alg":"HS256","typ":"JWT"}')}.${part(`{"iss":"deep-key","x":${extra}}`)}`;
    return `${input}.${createHmac('sha256', JWT_SECRET).update(input).digest('base64url')}`;
  }

  test('a signed jwt whose claims nest too deep is refused as invalid JSON', async () => {
    const refused = await alongsideOthers(() => request(`${fx.gw.http}/jwt`, { headers: { authorization: `Bearer ${jwtWith(TOO_DEEP)}` } }));
    assert.equal(refused.status, 401, refused.text);
    const accepted = await request(`${fx.gw.http}/jwt`, { headers: { authorization: `Bearer ${jwtWith(AT_LIMIT)}` } });
    assert.equal(accepted.status, 200, accepted.text);
  });
});

describe('APIs answer 400 and say why', () => {
  const depthMessage = new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`);

  test('the admin API', async () => {
    const reply = await alongsideOthers(() => postJson('/consumers', `{"username":"x","tags":${HUGE}}`, fx.gw.admin));
    assert.equal(reply.status, 400, reply.text);
    assert.match(reply.json().message, depthMessage);
  });

  test('metering ingest: an event whose data nests too deep is refused whole', async () => {
    const api = new MeteringApi(fx.gw.http + ROUTE_PATH, 'unused');
    const [head, tail] = JSON.stringify(event({ data: { deep: 'MARK' } })).split('"MARK"');
    const reply = await alongsideOthers(() => api.send('POST', '/events', `${head}${HUGE}${tail}`, { 'content-type': CE_SINGLE }));
    assert.match(assertProblem(reply, 400, 'body').detail, depthMessage);
  });

  test('the metering and billing JSON APIs (meters, customers, collectors)', async () => {
    const api = new MeteringApi(fx.gw.http + ROUTE_PATH, 'unused');
    for (const path of ['/meters', '/customers', '/collectors']) {
      const reply = await alongsideOthers(() => api.send('POST', path, `{"key":"deep","labels":${HUGE}}`, { 'content-type': 'application/json' }));
      assert.match(assertProblem(reply, 400, 'body').detail, depthMessage, path);
    }
  });
});
