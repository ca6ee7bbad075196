/**
 * Kong's key-auth access cases (spec/03-plugins/09-key-auth/02-access_spec.lua and 03-invalidations_spec.lua)
 * against a real gateway, a real echo upstream and a real gRPC upstream: where a key is read (header, query,
 * body of three types, nginx's `-`/`_` header names), Kong's messages and `WWW-Authenticate`, duplicates,
 * `hide_credentials`, `run_on_preflight`, `anonymous`, the identity headers, expiring keys, changes through
 * the admin API taking effect at once, and keys kept only as digests in the store.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../fixtures/grpc-echo.ts';
import { gatewayOnHttpAndGrpcEchoAroundTests } from '../../fixtures/http-and-grpc-echo.ts';
import { request, startGateway, type Reply, type RequestOptions } from '../../helpers/gateway.ts';
import { LevelStore } from '../../../src/store/level.ts';

const ANONYMOUS_ID = '3f1c7a52-0000-4000-8000-00000000a0a0';
const MISSING_ANONYMOUS = '3f1c7a52-0000-4000-8000-00000000dead';

let kongCredentialId: string;

function route(n: number | string, config: Record<string, unknown> = {}) {
  return { name: `key-auth${n}`, hosts: [`key-auth${n}.test`], plugins: [{ name: 'key-auth', config }] };
}

function config(upstreamUrl: string, grpcTarget: string): Record<string, any> {
  return {
    services: [
      {
        name: 'echo',
        url: upstreamUrl,
        routes: [
          route(1),
          route(2, { hide_credentials: true, realm: 'test-realm' }),
          route(3, { anonymous: ANONYMOUS_ID }),
          route(4, { anonymous: MISSING_ANONYMOUS }),
          route(5, { key_in_body: true }),
          route(6, { key_in_body: true, hide_credentials: true }),
          route(7, { run_on_preflight: false }),
          route(8, { key_names: ['api_key'] }),
          route(9, { key_names: ['api-key'] }),
          route(10, { anonymous: 'no-body' }),
        ],
      },
      {
        name: 'grpc',
        url: `grpc://${grpcTarget}`,
        routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [{ name: 'key-auth' }] }],
      },
    ],
    consumers: [
      { id: ANONYMOUS_ID, username: 'no-body' },
      { username: 'bob', keyauth_credentials: [{ key: 'kong' }] },
    ],
  };
}

const fx = gatewayOnHttpAndGrpcEchoAroundTests(config, async () => {
  kongCredentialId = (await admin('GET', '/consumers/bob/key-auth')).json().data[0].id;
});

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(fx.gw.admin + path, { method, body });
}

function proxy(host: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  return request(fx.gw.http + path, { ...options, headers: { host, ...options.headers } });
}

/** Kong's mock upstream's view: what the upstream got. */
function echoed(reply: Reply): { path: string; query: string; headers: Record<string, string | undefined>; body: string } {
  assert.equal(reply.status, 200, reply.text);
  return reply.json();
}

function assertRefused(reply: Reply, message: string, challenge = 'Key') {
  assert.equal(reply.status, 401, reply.text);
  assert.equal(reply.json().message, message);
  assert.equal(reply.headers['www-authenticate'], challenge);
}

/** A body of `type` carrying `fields` (JSON values stay JSON). */
function bodyOf(type: string, fields: Record<string, unknown>): { body: string; headers: Record<string, string> } {
  if (type === 'application/json') return { body: JSON.stringify(fields), headers: { 'content-type': type } };
  if (type === 'application/x-www-form-urlencoded') return { body: new URLSearchParams(fields as Record<string, string>).toString(), headers: { 'content-type': type } };
  const boundary = 'tollgate-boundary';
  const parts = Object.entries(fields).map(([k, v]) => `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  return { body: `${parts.join('')}--${boundary}--\r\n`, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

const BODY_TYPES = ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data'];

describe('Kong key-auth: unauthorized', () => {
  it('KA01 OPTIONS passes unchecked when run_on_preflight is false', async () => {
    assert.equal((await proxy('key-auth7.test', '/status/200', { method: 'OPTIONS' })).status, 200);
  });

  it('KA02 OPTIONS is checked when run_on_preflight is true', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200', { method: 'OPTIONS' }), 'No API key found in request');
  });

  it('KA03 missing credentials: 401 with WWW-Authenticate: Key', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200'), 'No API key found in request');
  });

  it('KA04 an empty key header is no key', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: '' } }), 'No API key found in request');
  });

  it('KA05 a configured realm is in the challenge', async () => {
    assertRefused(await proxy('key-auth2.test', '/status/200', { headers: { apikey: '' } }), 'No API key found in request', 'Key realm="test-realm"');
  });

  it('KA06 a bare ?apikey is no key', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200?apikey'), 'No API key found in request');
  });
});

describe('Kong key-auth: key in the query string', () => {
  it('KA07 a valid key authenticates', async () => {
    echoed(await proxy('key-auth1.test', '/request?apikey=kong'));
  });

  it('KA08 an invalid key is 401 Unauthorized', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200?apikey=123'), 'Unauthorized');
  });

  it('KA09 a key sent twice is refused', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200?apikey=kong&apikey=kong'), 'Duplicate API key found');
  });
});

describe('Kong key-auth: key in the request body', () => {
  for (const type of BODY_TYPES) {
    it(`KA10 ${type}: a valid key in the body authenticates (any method, as Kong reads bodies)`, async () => {
      echoed(await proxy('key-auth5.test', '/request', { method: 'POST', ...bodyOf(type, { apikey: 'kong' }) }));
      echoed(await proxy('key-auth5.test', '/request', { method: 'GET', ...bodyOf(type, { apikey: 'kong' }) }));
    });

    it(`KA11 ${type}: a valid key in the query, another field in the body`, async () => {
      echoed(await proxy('key-auth5.test', '/request?apikey=kong', { method: 'POST', ...bodyOf(type, { non_apikey: 'kong' }) }));
    });

    it(`KA12 ${type}: a valid key in a header`, async () => {
      const { body, headers } = bodyOf(type, { non_apikey: 'kong' });
      echoed(await proxy('key-auth5.test', '/request', { method: 'POST', body, headers: { ...headers, apikey: 'kong' } }));
    });

    it(`KA13 ${type}: an invalid key in the body is 401 Unauthorized`, async () => {
      assertRefused(await proxy('key-auth5.test', '/status/200', { method: 'POST', ...bodyOf(type, { apikey: '123' }) }), 'Unauthorized');
    });
  }

  it('KA14 application/json: a key given twice (an array) is refused', async () => {
    assertRefused(await proxy('key-auth5.test', '/status/200', { method: 'POST', ...bodyOf('application/json', { apikey: ['kong', 'kong'] }) }), 'Duplicate API key found');
  });

  it('KA15 a form: a key given twice is refused', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    assertRefused(await proxy('key-auth5.test', '/status/200', { method: 'POST', body: 'apikey=kong&apikey=kong', headers: form }), 'Duplicate API key found');
  });

  it('KA16 a form: apikey[] and apikey[1] are not api keys', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const body of ['apikey[]=kong&apikey[]=kong', 'apikey[1]=kong&apikey[1]=kong']) {
      assertRefused(await proxy('key-auth5.test', '/status/200', { method: 'POST', body, headers: form }), 'No API key found in request');
    }
  });

  it('KA17 key_in_body with an unsupported content type finds no key', async () => {
    assertRefused(await proxy('key-auth6.test', '/status/200', { method: 'POST', body: 'foobar', headers: { 'content-type': 'text/plain' } }), 'No API key found in request');
  });
});

describe('Kong key-auth: key in headers', () => {
  it('KA18 a valid key authenticates', async () => {
    echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'kong' } }));
  });

  it('KA19 an invalid key is 401 Unauthorized', async () => {
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: '123' } }), 'Unauthorized');
  });

  it('KA20 a key header sent twice is refused', async () => {
    const reply = await new Promise<Reply>((resolve, reject) => {
      // Node's client joins repeated headers unless given as raw pairs.
      import('node:http').then(({ request: raw }) => {
        const req = raw(fx.gw.http + '/status/200', { headers: ['host', 'key-auth1.test', 'apikey', 'kong', 'apikey', 'kong'] }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.from(text), text, json: () => JSON.parse(text) });
          });
        });
        req.on('error', reject);
        req.end();
      });
    });
    assertRefused(reply, 'Duplicate API key found');
  });

  it('KA21 key_names with `_` or `-` match a header spelled either way (nginx underscores_in_headers)', async () => {
    for (const host of ['key-auth8.test', 'key-auth9.test']) {
      for (const name of ['api_key', 'api-key']) {
        echoed(await proxy(host, '/request', { headers: { [name]: 'kong' } }));
        assertRefused(await proxy(host, '/status/200', { headers: { [name]: '123' } }), 'Unauthorized');
      }
    }
  });
});

describe('Kong key-auth: key in gRPC metadata', () => {
  it('KA22 a call without a key is UNAUTHENTICATED', async () => {
    await assert.rejects(unary(fx.grpcClient, { message: 'hello' }), (err: grpc.ServiceError) => err.code === 16);
  });

  it('KA23 a call with the key in its metadata reaches the upstream as bob', async () => {
    const { reply } = await unary(fx.grpcClient, { message: 'hello noname' }, { metadata: { apikey: 'kong' } });
    assert.equal(reply.message, 'hello noname');
    assert.equal(reply.metadata['x-consumer-username'], 'bob');
  });
});

describe('Kong key-auth: identity headers', () => {
  it('KA24 the upstream learns the consumer and the credential; client-sent copies never pass', async () => {
    const got = echoed(await proxy('key-auth1.test', '/request?apikey=kong', { headers: { 'x-consumer-username': 'mallory', 'x-anonymous-consumer': 'true' } }));
    assert.match(got.headers['x-consumer-id']!, /^[0-9a-f-]{36}$/);
    assert.equal(got.headers['x-consumer-username'], 'bob');
    assert.equal(got.headers['x-credential-identifier'], kongCredentialId);
    assert.equal(got.headers['x-anonymous-consumer'], undefined);
  });
});

describe('Kong key-auth: hide_credentials', () => {
  it('KA25 false sends the key upstream (query, header, body); true keeps it from the upstream', async () => {
    assert.match(echoed(await proxy('key-auth1.test', '/request?apikey=kong')).query, /apikey=kong/);
    assert.doesNotMatch(echoed(await proxy('key-auth2.test', '/request?apikey=kong')).query, /apikey/);
    assert.equal(echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'kong' } })).headers.apikey, 'kong');
    assert.equal(echoed(await proxy('key-auth2.test', '/request', { headers: { apikey: 'kong' } })).headers.apikey, undefined);
  });

  for (const type of BODY_TYPES) {
    it(`KA26 ${type}: the key leaves the body, the other fields and the media type stay`, async () => {
      const kept = echoed(await proxy('key-auth5.test', '/request', { method: 'POST', ...bodyOf(type, { apikey: 'kong', foo: 'bar' }) }));
      assert.match(kept.body, /kong/);
      const hidden = echoed(await proxy('key-auth6.test', '/request', { method: 'POST', ...bodyOf(type, { apikey: 'kong', foo: 'bar' }) }));
      assert.doesNotMatch(hidden.body, /kong/);
      assert.match(hidden.body, /bar/);
      assert.equal(String(hidden.headers['content-type']).split(';')[0], type);
    });
  }

  it('KA27 the query keeps its order without the key (also when the key name was escaped)', async () => {
    assert.equal(echoed(await proxy('key-auth1.test', '/request?c=value1&b=value2&apikey=kong&a=value3')).query, 'c=value1&b=value2&apikey=kong&a=value3');
    assert.equal(echoed(await proxy('key-auth2.test', '/request?c=value1&b=value2&apikey=kong&a=value3')).query, 'c=value1&b=value2&a=value3');
    const escaped = echoed(await proxy('key-auth2.test', '/request?c=valu%651&b=value2&api%6B%65%79=kong&a=valu%653')).query;
    assert.deepEqual([...new URLSearchParams(escaped)], [['c', 'value1'], ['b', 'value2'], ['a', 'value3']]);
  });
});

describe('Kong key-auth: anonymous', () => {
  it('KA28 right credentials with anonymous: the key owner', async () => {
    const got = echoed(await proxy('key-auth3.test', '/request?apikey=kong'));
    assert.equal(got.headers['x-consumer-username'], 'bob');
    assert.equal(got.headers['x-credential-identifier'], kongCredentialId);
    assert.equal(got.headers['x-anonymous-consumer'], undefined);
  });

  it('KA29 no credentials with anonymous (by id, or by username): the anonymous consumer', async () => {
    for (const host of ['key-auth3.test', 'key-auth10.test']) {
      const got = echoed(await proxy(host, '/request?apikey=wrong'));
      assert.equal(got.headers['x-anonymous-consumer'], 'true');
      assert.equal(got.headers['x-credential-identifier'], undefined);
      assert.equal(got.headers['x-consumer-username'], 'no-body');
      assert.equal(got.headers['x-consumer-id'], ANONYMOUS_ID);
    }
  });

  it("KA30 an anonymous consumer that does not exist is a 500 with Kong's message", async () => {
    const reply = await proxy('key-auth4.test', '/request');
    assert.equal(reply.status, 500);
    assert.equal(reply.json().message, `anonymous consumer ${MISSING_ANONYMOUS} is configured but doesn't exist`);
  });
});

describe('Kong key-auth: credentials change through the admin API (03-invalidations)', () => {
  it('KA31 a key created at runtime works at once; changing it retires the old value; deleting it ends it', async () => {
    await admin('POST', '/consumers', { username: 'carol' });
    const created = await admin('POST', '/consumers/carol/key-auth', { key: 'carol-key' });
    assert.equal(created.status, 201, created.text);
    assert.equal(echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'carol-key' } })).headers['x-consumer-username'], 'carol');
    assert.equal((await admin('PATCH', `/key-auths/${created.json().id}`, { key: 'carol-key-2' })).status, 200);
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: 'carol-key' } }), 'Unauthorized');
    echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'carol-key-2' } }));
    assert.equal((await admin('DELETE', `/consumers/carol/key-auth/${created.json().id}`)).status, 204);
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: 'carol-key-2' } }), 'Unauthorized');
  });

  it("KA32 deleting the consumer ends its keys", async () => {
    await admin('POST', '/consumers', { username: 'dave' });
    await admin('POST', '/consumers/dave/key-auth', { key: 'dave-key' });
    echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'dave-key' } }));
    assert.equal((await admin('DELETE', '/consumers/dave')).status, 204);
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: 'dave-key' } }), 'Unauthorized');
    // The key is free for another consumer.
    await admin('POST', '/consumers', { username: 'erin' });
    assert.equal((await admin('POST', '/consumers/erin/key-auth', { key: 'dave-key' })).status, 201);
  });

  it('KA33 an expiring key authenticates for its ttl only', async () => {
    const created = await admin('POST', '/consumers/bob/key-auth', { key: 'short-lived', ttl: 1 });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().ttl, 1);
    echoed(await proxy('key-auth1.test', '/request', { headers: { apikey: 'short-lived' } }));
    await new Promise((r) => setTimeout(r, 1200));
    assertRefused(await proxy('key-auth1.test', '/status/200', { headers: { apikey: 'short-lived' } }), 'Unauthorized');
  });
});

describe('keys at rest', () => {
  it('KA34 the store holds no key as given', async () => {
    const second = await startGateway(config(fx.upstream.url, fx.grpcEcho.target), { dataDir: join(fx.gw.dataDir, 'second') });
    try {
      await request(second.admin + '/consumers/bob/key-auth', { method: 'POST', body: { key: 'runtime-secret-key' } });
      const listed = await request(second.admin + '/consumers/bob/key-auth');
      assert.ok(!listed.text.includes('runtime-secret-key'), 'a key is shown once, when created');
    } finally {
      await second.stop();
    }
    const store = new LevelStore(join(second.dataDir, 'store'));
    await store.open();
    try {
      let entries = 0;
      for await (const [key, value] of store.scan({})) {
        entries++;
        assert.ok(!(key + value).includes('runtime-secret-key'), `${key} = ${value}`);
      }
      assert.ok(entries > 0);
    } finally {
      await store.close();
    }
  });
});
