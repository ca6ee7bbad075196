/**
 * Kong's hmac-auth cases (spec/03-plugins/19-hmac-auth/03-access_spec.lua) against a real gateway and real
 * upstreams, with signatures computed here: Kong's messages and realm, the Date/X-Date clock skew, malformed
 * and partial parameters, Authorization and Proxy-Authorization, each algorithm, `request-line` and
 * `@request-target` over the request as sent (query, escapes, HTTP/1.0), the body's Digest, enforce_headers,
 * algorithms, anonymous, hide_credentials, the identity headers, gRPC, logical AND/OR with key-auth; and
 * credentials declared in the file (nested in a consumer and top-level), beside those of the admin API.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../fixtures/grpc-echo.ts';
import { gatewayOnHttpAndGrpcEchoAroundTests } from '../../fixtures/http-and-grpc-echo.ts';
import { request, type Reply, type RequestOptions } from '../../helpers/gateway.ts';
import { portOf, rawRequest } from '../../helpers/support.ts';

const ANONYMOUS_ID = '7f3a1c52-0000-4000-8000-00000000a0a0';
const MISSING_ANONYMOUS = '7f3a1c52-0000-4000-8000-00000000dead';

const SIGNATURE_NOT_VALID = 'HMAC signature cannot be verified';
const SIGNATURE_NOT_SAME = 'HMAC signature does not match';
const NO_VALID_DATE = 'HMAC signature cannot be verified, a valid date or x-date header is required for HMAC Authentication';

function route(n: number | string, config: Record<string, unknown> = {}, extra: Record<string, unknown>[] = []) {
  return { name: `hmacauth${n}`, hosts: [`hmacauth${n}.test`], plugins: [{ name: 'hmac-auth', config: { clock_skew: 3000, ...config } }, ...extra] };
}

function config(upstreamUrl: string, grpcTarget: string): Record<string, any> {
  return {
    services: [
      {
        name: 'echo',
        url: upstreamUrl,
        routes: [
          route(1, { realm: 'test-realm' }),
          route(2, { anonymous: ANONYMOUS_ID }),
          route(3, { anonymous: MISSING_ANONYMOUS }),
          route(4, { validate_request_body: true }),
          route(5, { enforce_headers: ['date', 'request-line'], validate_request_body: true }),
          route(6, { enforce_headers: ['date', 'request-line'], algorithms: ['hmac-sha1', 'hmac-sha256'], validate_request_body: true }),
          route(7, { anonymous: 'no-body' }),
          route(8, { hide_credentials: true }),
          { name: 'logical-and', hosts: ['logical-and.test'], plugins: [{ name: 'hmac-auth' }, { name: 'key-auth' }] },
          {
            name: 'logical-or',
            hosts: ['logical-or.test'],
            plugins: [{ name: 'hmac-auth', config: { anonymous: 'Anonymous' } }, { name: 'key-auth', config: { anonymous: 'Anonymous' } }],
          },
        ],
      },
      {
        name: 'grpc',
        url: `grpc://${grpcTarget}`,
        routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [{ name: 'hmac-auth', config: { clock_skew: 3000 } }] }],
      },
    ],
    consumers: [
      { id: ANONYMOUS_ID, username: 'no-body' },
      { username: 'Anonymous' },
      { username: 'Mickey', keyauth_credentials: [{ key: 'Mouse' }] },
      { username: 'Aladdin', hmacauth_credentials: [{ username: 'Aladdin', secret: 'OpenSesame' }] },
      { username: 'dave' },
    ],
    // A credential at the top level names its consumer, as decK writes them.
    hmacauth_credentials: [{ consumer: 'dave', username: 'dave-signer', secret: 'dave-secret' }],
  };
}

const fx = gatewayOnHttpAndGrpcEchoAroundTests(config, async () => {
  // Kong's fixture: bob (custom_id 1234) signs with "secret"; created through the admin API.
  assert.equal((await admin('POST', '/consumers', { username: 'bob', custom_id: '1234' })).status, 201);
  const created = await admin('POST', '/consumers/bob/hmac-auth', { username: 'bob', secret: 'secret' });
  assert.equal(created.status, 201, created.text);
});

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(fx.gw.admin + path, { method, body });
}

function proxy(host: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  return request(fx.gw.http + path, { ...options, headers: { host, ...options.headers } });
}

/** An HTTP date, as clients send them (RFC 1123). */
function httpDate(offsetSeconds = 0): string {
  return new Date(Date.now() + offsetSeconds * 1000).toUTCString();
}

const DIGESTS = { 'hmac-sha1': 'sha1', 'hmac-sha256': 'sha256', 'hmac-sha384': 'sha384', 'hmac-sha512': 'sha512' } as const;
type Algorithm = keyof typeof DIGESTS;

/** The Base64 HMAC of the signing string `lines` joined by newlines. */
function sign(secret: string, lines: string[], algorithm: Algorithm = 'hmac-sha1'): string {
  return createHmac(DIGESTS[algorithm], secret).update(lines.join('\n')).digest('base64');
}

function hmacHeader(signature: string, headers: string, { username = 'bob', algorithm = 'hmac-sha1' } = {}): string {
  return `hmac username="${username}",algorithm="${algorithm}",headers="${headers}",signature="${signature}"`;
}

/** bob's Authorization over the Date header alone. */
function signedDate(date: string, algorithm: Algorithm = 'hmac-sha1'): string {
  return hmacHeader(sign('secret', [`date: ${date}`], algorithm), 'date', { algorithm });
}

function echoed(reply: Reply): { headers: Record<string, string | undefined>; path: string; query: string; body: string } {
  assert.equal(reply.status, 200, reply.text);
  return reply.json();
}

function assertRefused(reply: Reply, message: string, challenge = 'hmac realm="test-realm"') {
  assert.equal(reply.status, 401, reply.text);
  assert.equal(reply.json().message, message);
  assert.equal(reply.headers['www-authenticate'], challenge);
}

describe('Kong hmac-auth: refused', () => {
  it('HM01 no Authorization: Unauthorized, with the realm when one is set', async () => {
    assertRefused(await proxy('hmacauth1.test', '/status/200', { headers: { date: httpDate() } }), 'Unauthorized');
    assertRefused(await proxy('hmacauth4.test', '/status/200'), 'Unauthorized', 'hmac');
  });

  it('HM02 what is no hmac value cannot be verified, in Authorization or Proxy-Authorization', async () => {
    const date = httpDate();
    assertRefused(await proxy('hmacauth1.test', '/', { method: 'POST', body: {}, headers: { date, authorization: 'asd' } }), SIGNATURE_NOT_VALID);
    assertRefused(await proxy('hmacauth1.test', '/', { method: 'POST', body: {}, headers: { date, 'proxy-authorization': 'asd' } }), SIGNATURE_NOT_VALID);
    assertRefused(await proxy('hmacauth4.test', '/', { headers: { date, authorization: 'Basic dXNlcm5hbWU6cGFzc3dvcmQ=' } }), SIGNATURE_NOT_VALID, 'hmac');
  });

  it('HM03 a signature that is not Base64 does not match', async () => {
    const authorization = hmacHeader('not really a base64 encoded value!!!', 'date');
    assertRefused(await proxy('hmacauth1.test', '/', { method: 'POST', headers: { date: httpDate(), authorization } }), SIGNATURE_NOT_SAME);
  });

  it('HM04 no Date nor X-Date, a malformed one, or one outside the clock skew', async () => {
    const authorization = signedDate(httpDate());
    assertRefused(await proxy('hmacauth1.test', '/', { headers: { authorization } }), NO_VALID_DATE);
    assertRefused(await proxy('hmacauth1.test', '/', { headers: { 'x-date': 'wrong date', authorization } }), NO_VALID_DATE);
    const late = httpDate(-3001);
    assertRefused(await proxy('hmacauth1.test', '/', { headers: { date: late, authorization: signedDate(late) } }), NO_VALID_DATE);
    const early = httpDate(3001);
    assertRefused(await proxy('hmacauth1.test', '/', { headers: { date: early, authorization: signedDate(early) } }), NO_VALID_DATE);
  });

  it('HM05 parameters missing, misnamed or malformed cannot be verified', async () => {
    const date = httpDate();
    const signature = sign('secret', [`date: ${date}`]);
    for (const authorization of [
      'hmac username="bob"',
      'hmac username',
      `hmac algorithm="hmac-sha1",headers="date",signature="${signature}"`,
      `hmac username="bob",algorithm="hmac-sha1",headers="date"`,
      `hmac username="bob",algorithm="hmac-sha1",header="date",signature="${signature}"`,
      `hmac username="bob",algorithm="hmac-sha1",headers="date",signatures="${signature}"`,
      `hmac username="bob",algorithm="hmac-sha1",headers="date",signature=${signature}`,
      `hmac username="bob",algorithm="hmac-sha1",headers=date,signature="${signature}"`,
      `hmac username="",algorithm="hmac-sha1",headers="date",signature="${signature}"`,
      hmacHeader(signature, 'date', { username: 'bobb' }),
    ]) {
      assertRefused(await proxy('hmacauth1.test', '/', { headers: { date, authorization } }), SIGNATURE_NOT_VALID);
    }
  });

  it('HM06 an algorithm not in the config cannot be verified; one signed with another digest does not match', async () => {
    const date = httpDate();
    const lines = [`date: ${date}`, 'GET /request HTTP/1.1'];
    const sha512 = hmacHeader(sign('secret', lines, 'hmac-sha512'), 'date request-line', { algorithm: 'hmac-sha512' });
    assertRefused(await proxy('hmacauth6.test', '/request', { headers: { date, authorization: sha512 } }), SIGNATURE_NOT_VALID, 'hmac');
    const sha1Named = hmacHeader(sign('secret', lines, 'hmac-sha256'), 'date request-line');
    assertRefused(await proxy('hmacauth6.test', '/request', { headers: { date, authorization: sha1Named } }), SIGNATURE_NOT_SAME, 'hmac');
    const unknown = hmacHeader(sign('secret', lines), 'date request-line', { algorithm: 'hmac-md5' });
    assertRefused(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: unknown } }), SIGNATURE_NOT_VALID);
  });

  it('HM07 enforce_headers: a signature that leaves one out cannot be verified', async () => {
    const date = httpDate();
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, 'content-md5: md5']), 'date content-md5');
    assertRefused(await proxy('hmacauth5.test', '/request', { headers: { date, 'content-md5': 'md5', authorization } }), SIGNATURE_NOT_VALID, 'hmac');
  });

  it('HM08 more signed header names than the bound cannot be verified (no signing string is hashed)', async () => {
    const date = httpDate();
    const names = Array.from({ length: 51 }, () => 'date');
    const authorization = hmacHeader(sign('secret', names.map(() => `date: ${date}`)), names.join(' '));
    assertRefused(await proxy('hmacauth1.test', '/', { headers: { date, authorization } }), SIGNATURE_NOT_VALID);
    const fifty = names.slice(1);
    echoed(await proxy('hmacauth1.test', '/', { headers: { date, authorization: hmacHeader(sign('secret', fifty.map(() => `date: ${date}`)), fifty.join(' ')) } }));
  });
});

describe('Kong hmac-auth: gRPC', () => {
  it('HM09 a call without credentials is UNAUTHENTICATED; signed over Date, or @request-target (HTTP/2), it passes', async () => {
    await assert.rejects(unary(fx.grpcClient, { message: 'hello' }), (err: grpc.ServiceError) => err.code === 16);
    const date = httpDate();
    const { reply } = await unary(fx.grpcClient, { message: 'hello' }, { metadata: { date, authorization: signedDate(date) } });
    assert.equal(reply.metadata['x-consumer-username'], 'bob');
    const target = hmacHeader(sign('secret', [`date: ${date}`, '@request-target: post /tollgate.test.Echo/Unary']), 'date @request-target');
    const viaTarget = await unary(fx.grpcClient, { message: 'hello' }, { metadata: { date, authorization: target } });
    assert.equal(viaTarget.reply.metadata['x-credential-identifier'], 'bob');
  });
});

describe('Kong hmac-auth: authorized', () => {
  it('HM10 GET and POST signed over Date; Authorization goes upstream unless hidden', async () => {
    const date = httpDate();
    const authorization = signedDate(date);
    assert.equal(echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization } })).headers.authorization, authorization);
    assert.equal(echoed(await proxy('hmacauth1.test', '/request', { method: 'POST', body: {}, headers: { date, authorization } })).headers.authorization, authorization);
  });

  it('HM11 each algorithm, with its own digest', async () => {
    for (const algorithm of Object.keys(DIGESTS) as Algorithm[]) {
      const date = httpDate();
      const authorization = hmacHeader(sign('secret', [`date: ${date}`, 'GET /request HTTP/1.1'], algorithm), 'date request-line', { algorithm });
      const reply = await proxy(algorithm === 'hmac-sha1' ? 'hmacauth6.test' : 'hmacauth5.test', '/request', { headers: { date, authorization } });
      assert.equal(echoed(reply).headers['x-consumer-username'], 'bob', algorithm);
    }
  });

  it('HM12 Proxy-Authorization is read first; a broken one falls back on Authorization', async () => {
    const date = httpDate();
    const authorization = signedDate(date);
    echoed(await proxy('hmacauth1.test', '/request', { method: 'POST', body: {}, headers: { date, 'proxy-authorization': authorization, authorization: 'hello' } }));
    echoed(await proxy('hmacauth1.test', '/request', { method: 'POST', body: {}, headers: { date, 'proxy-authorization': 'hmac username', authorization } }));
  });

  it('HM13 other headers, with or without spaces between the parameters; a header not sent signs as `name:`', async () => {
    const date = httpDate();
    const lines = [`date: ${date}`, 'content-md5: md5', 'GET /request HTTP/1.1'];
    const spaced = `hmac username="bob",  algorithm="hmac-sha1",  headers="date content-md5 request-line", signature="${sign('secret', lines)}"`;
    echoed(await proxy('hmacauth1.test', '/request', { headers: { date, 'content-md5': 'md5', 'proxy-authorization': spaced, authorization: 'hello' } }));
    const absent = hmacHeader(sign('secret', [`date: ${date}`, 'x-absent:']), 'date x-absent');
    echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: absent } }));
    // Kong's unanchored pattern: a stray quote before `hmac` is no matter.
    echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: `"${signedDate(date)}` } }));
  });

  it('HM14 X-Date is read before Date; a malformed one may be signed while Date is right', async () => {
    const date = httpDate();
    const xDate = hmacHeader(sign('secret', [`x-date: ${date}`, 'GET /request HTTP/1.1']), 'x-date request-line');
    echoed(await proxy('hmacauth1.test', '/request', { headers: { 'x-date': date, authorization: xDate } }));
    const signedWrong = hmacHeader(sign('secret', ['x-date: wrong date', 'content-md5: md5', 'GET /request HTTP/1.1']), 'x-date content-md5 request-line');
    echoed(await proxy('hmacauth1.test', '/request', { headers: { 'x-date': 'wrong date', date, 'content-md5': 'md5', authorization: signedWrong } }));
    const dateWrong = hmacHeader(sign('secret', ['date: wrong date', 'GET /request HTTP/1.1']), 'date request-line');
    echoed(await proxy('hmacauth1.test', '/request', { headers: { 'x-date': date, date: 'wrong date', authorization: dateWrong } }));
  });

  it("HM14b the date forms nginx reads: RFC 1123, RFC 850 and asctime; an impossible day is none", async () => {
    const now = new Date();
    const [weekday, day, month, year, time] = now.toUTCString().replace(',', '').split(' ');
    const longWeekday = new Intl.DateTimeFormat('en-US', { weekday: 'long', timeZone: 'UTC' }).format(now);
    for (const date of [`${longWeekday}, ${day}-${month}-${year.slice(2)} ${time} GMT`, `${weekday} ${month} ${String(Number(day)).padStart(2, ' ')} ${time} ${year}`]) {
      echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: signedDate(date) } }));
    }
    const impossible = `${weekday}, 31 Feb ${year} ${time} GMT`;
    assertRefused(await proxy('hmacauth1.test', '/request', { headers: { date: impossible, authorization: signedDate(impossible) } }), NO_VALID_DATE);
  });

  it('HM15 the identity headers: consumer id, custom id, username; the credential by its username', async () => {
    const consumer = (await admin('GET', '/consumers/bob')).json();
    const date = httpDate();
    const { headers } = echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: signedDate(date) } }));
    assert.equal(headers['x-consumer-id'], consumer.id);
    assert.equal(headers['x-consumer-custom-id'], '1234');
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-credential-identifier'], 'bob');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('HM16 hide_credentials keeps the header that was read from the upstream, and only that one', async () => {
    const date = httpDate();
    const authorization = signedDate(date);
    const fromAuthorization = echoed(await proxy('hmacauth8.test', '/request', { headers: { date, authorization } }));
    assert.equal(fromAuthorization.headers.authorization, undefined);
    const fromProxy = echoed(await proxy('hmacauth8.test', '/request', { headers: { date, 'proxy-authorization': authorization, authorization: 'Bearer other' } }));
    assert.equal(fromProxy.headers['proxy-authorization'], undefined);
    assert.equal(fromProxy.headers.authorization, 'Bearer other');
  });

  it('HM17 credentials of the file: nested in a consumer, and at the top level', async () => {
    const date = httpDate();
    const aladdin = hmacHeader(sign('OpenSesame', [`date: ${date}`]), 'date', { username: 'Aladdin' });
    assert.equal(echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: aladdin } })).headers['x-consumer-username'], 'Aladdin');
    const dave = hmacHeader(sign('dave-secret', [`date: ${date}`]), 'date', { username: 'dave-signer' });
    const { headers } = echoed(await proxy('hmacauth1.test', '/request', { headers: { date, authorization: dave } }));
    assert.equal(headers['x-consumer-username'], 'dave');
    assert.equal(headers['x-credential-identifier'], 'dave-signer');
  });
});

describe('Kong hmac-auth: request-line and @request-target', () => {
  const signedLine = (line: string, date: string) => hmacHeader(sign('secret', [`date: ${date}`, 'content-md5: md5', line]), 'date content-md5 request-line');

  it('HM18 the request line covers the query as sent; signed without it, it does not match', async () => {
    const date = httpDate();
    const headers = { date, 'content-md5': 'md5' };
    assertRefused(await proxy('hmacauth5.test', '/request?name=foo', { headers: { ...headers, authorization: signedLine('GET /request HTTP/1.1', date) } }), SIGNATURE_NOT_SAME, 'hmac');
    assertRefused(await proxy('hmacauth5.test', '/request/?name=foo', { headers: { ...headers, authorization: signedLine('GET /request/ HTTP/1.1', date) } }), SIGNATURE_NOT_SAME, 'hmac');
    echoed(await proxy('hmacauth5.test', '/request?name=foo', { headers: { ...headers, authorization: signedLine('GET /request?name=foo HTTP/1.1', date) } }));
  });

  it('HM19 escapes, repeated and several parameters, an escaped path, the root: all as the client sent them', async () => {
    const date = httpDate();
    for (const target of [
      `/request?name=${encodeURIComponent('foo bar')}`,
      `/request?name=${encodeURIComponent('foo bár')}`,
      '/request?name=foo&name=bar',
      '/request?name=foo&age=8',
      `/request/${encodeURIComponent('some value')}/?name=foo&name=bar`,
      '/',
    ]) {
      const reply = await proxy('hmacauth5.test', target, { headers: { date, 'content-md5': 'md5', authorization: signedLine(`GET ${target} HTTP/1.1`, date) } });
      echoed(reply);
    }
    const escaped = echoed(await proxy('hmacauth5.test', `/request/some%20value/`, { headers: { date, 'content-md5': 'md5', authorization: signedLine('GET /request/some%20value/ HTTP/1.1', date) } }));
    assert.equal(decodeURIComponent(escaped.path), '/request/some value/');
  });

  it('HM20 an HTTP/1.0 request signs its line as HTTP/1.0; a bare `?` is part of the target', async () => {
    const date = httpDate();
    for (const line of ['GET /request HTTP/1.0', 'GET /request? HTTP/1.1']) {
      const reply = await rawRequest(portOf(fx.gw.http), [line, 'Host: hmacauth1.test', `Date: ${date}`, 'Content-MD5: md5', `Proxy-Authorization: ${signedLine(line, date)}`]);
      assert.equal(reply.status, 200, reply.raw);
    }
  });

  it('HM21 @request-target: the lowercase method and the target', async () => {
    const date = httpDate();
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, 'content-md5: md5', '@request-target: get /request?a=1']), 'date content-md5 @request-target');
    echoed(await proxy('hmacauth1.test', '/request?a=1', { headers: { date, 'content-md5': 'md5', 'proxy-authorization': authorization, authorization: 'hello' } }));
  });

  it('HM22 enforce_headers with request-line: signed without it, cannot be verified', async () => {
    const date = httpDate();
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, 'content-md5: md5']), 'date content-md5');
    assertRefused(await proxy('hmacauth5.test', '/request', { headers: { date, 'content-md5': 'md5', authorization } }), SIGNATURE_NOT_VALID, 'hmac');
  });
});

describe('Kong hmac-auth: validate_request_body', () => {
  const postBody = '{"a":"apple","b":"ball"}';
  const digestOf = (body: string) => `SHA-256=${createHash('sha256').update(body).digest('base64')}`;

  it('HM23 a body without a Digest does not match; no body needs none, or the digest of nothing', async () => {
    const date = httpDate();
    assertRefused(await proxy('hmacauth4.test', '/request', { method: 'POST', body: postBody, headers: { date, authorization: signedDate(date) } }), SIGNATURE_NOT_SAME, 'hmac');
    echoed(await proxy('hmacauth4.test', '/request', { headers: { date, authorization: signedDate(date) } }));
    const digest = digestOf('');
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${digest}`]), 'date digest');
    echoed(await proxy('hmacauth4.test', '/request', { headers: { date, digest, authorization } }));
  });

  it('HM24 the Digest of the body, signed or not, passes; the body goes upstream whole', async () => {
    const date = httpDate();
    const digest = digestOf(postBody);
    const signed = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${digest}`]), 'date digest');
    assert.equal(echoed(await proxy('hmacauth4.test', '/request', { method: 'POST', body: postBody, headers: { date, digest, authorization: signed } })).body, postBody);
    echoed(await proxy('hmacauth4.test', '/request', { method: 'POST', body: postBody, headers: { date, digest, authorization: signedDate(date) } }));
  });

  it('HM25 a tampered body or a tampered Digest does not match', async () => {
    const date = httpDate();
    const digest = digestOf(postBody);
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${digest}`]), 'date digest');
    assertRefused(await proxy('hmacauth4.test', '/request', { method: 'POST', body: postBody + 'x', headers: { date, digest, authorization } }), SIGNATURE_NOT_SAME, 'hmac');
    const tampered = digestOf('tampered');
    const reSigned = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${digest}`]), 'date digest');
    assertRefused(await proxy('hmacauth4.test', '/request', { method: 'POST', body: postBody, headers: { date, digest: tampered, authorization: reSigned } }), SIGNATURE_NOT_SAME, 'hmac');
  });

  it('HM26 a body past 1 MiB does not match, as Kong refuses one past its body buffer; chunked or declared', async () => {
    const date = httpDate();
    const large = 'x'.repeat(1024 * 1024 + 1);
    const digest = digestOf(large);
    const authorization = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${digest}`]), 'date digest');
    assertRefused(await proxy('hmacauth4.test', '/request', { method: 'POST', body: large, headers: { date, digest, authorization } }), SIGNATURE_NOT_SAME, 'hmac');
    const chunked = { date, digest, authorization, 'transfer-encoding': 'chunked' };
    assertRefused(await proxy('hmacauth4.test', '/request', { method: 'POST', body: large, headers: chunked }), SIGNATURE_NOT_SAME, 'hmac');
    const justFits = 'y'.repeat(1024 * 1024);
    const fitsDigest = digestOf(justFits);
    const fitsSigned = hmacHeader(sign('secret', [`date: ${date}`, `digest: ${fitsDigest}`]), 'date digest');
    assert.equal(echoed(await proxy('hmacauth4.test', '/request', { method: 'POST', body: justFits, headers: { date, digest: fitsDigest, authorization: fitsSigned } })).body.length, justFits.length);
  });
});

describe('Kong hmac-auth: anonymous', () => {
  it('HM27 valid credentials with anonymous configured: the credential wins', async () => {
    const date = httpDate();
    const { headers } = echoed(await proxy('hmacauth2.test', '/request', { headers: { date, authorization: signedDate(date) } }));
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-credential-identifier'], 'bob');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('HM28 invalid credentials: the anonymous consumer, by id or by username', async () => {
    for (const host of ['hmacauth2.test', 'hmacauth7.test']) {
      const { headers } = echoed(await proxy(host, '/request'));
      assert.equal(headers['x-anonymous-consumer'], 'true');
      assert.equal(headers['x-consumer-username'], 'no-body');
      assert.equal(headers['x-credential-identifier'], undefined);
    }
  });

  it('HM29 an anonymous consumer that does not exist: 500 with Kong\'s message', async () => {
    const reply = await proxy('hmacauth3.test', '/request');
    assert.equal(reply.status, 500);
    assert.equal(reply.json().message, `anonymous consumer ${MISSING_ANONYMOUS} is configured but doesn't exist`);
  });
});

describe('Kong hmac-auth: with key-auth', () => {
  const aladdin = (date: string) => hmacHeader(sign('OpenSesame', [`date: ${date}`]), 'date', { username: 'Aladdin' });

  it('HM30 logical AND: both credentials pass; either one alone is refused by the other plugin', async () => {
    const date = httpDate();
    echoed(await proxy('logical-and.test', '/request', { headers: { date, apikey: 'Mouse', authorization: aladdin(date) } }));
    assertRefused(await proxy('logical-and.test', '/request', { headers: { apikey: 'Mouse' } }), 'Unauthorized', 'hmac');
    const onlyHmac = await proxy('logical-and.test', '/request', { headers: { date, authorization: aladdin(date) } });
    assert.equal(onlyHmac.status, 401);
    assert.equal(onlyHmac.headers['www-authenticate'], 'Key');
    const none = await proxy('logical-and.test', '/request');
    assert.equal(none.status, 401);
    assert.equal(none.headers['www-authenticate'], 'Key');
  });

  it('HM31 logical OR: either credential identifies the caller; none is the anonymous consumer', async () => {
    const date = httpDate();
    const consumerOf = async (headers: Record<string, string>) => echoed(await proxy('logical-or.test', '/request', { headers })).headers['x-consumer-username'];
    assert.notEqual(await consumerOf({ date, apikey: 'Mouse', authorization: aladdin(date) }), 'Anonymous');
    assert.equal(await consumerOf({ date, authorization: aladdin(date) }), 'Aladdin');
    assert.equal(await consumerOf({ apikey: 'Mouse' }), 'Mickey');
    assert.equal(await consumerOf({}), 'Anonymous');
  });
});
