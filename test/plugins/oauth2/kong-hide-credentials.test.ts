/**
 * Kong's hide_credentials cases (reference §7.11): what the upstream sees of the access token.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { echoed, kongFixtureAroundTests } from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const tokenFor = async (host: string) => (await fx.client.provisionToken({ host })).access_token as string;
const token1011 = async () => (await fx.client.provisionToken({ host: 'oauth2_11.test', clientId: 'clientid1011', secret: 'secret1011' })).access_token as string;

/** The echo upstream returns the raw body it got. */
function upstreamForm(res: Awaited<ReturnType<typeof fx.client.proxy>>): URLSearchParams {
  const body = echoed(res).body;
  return new URLSearchParams(typeof body === 'string' ? body : '');
}

describe('Kong §7.11 hide credentials', () => {
  it('HC01 without hide_credentials a form token is forwarded', async () => {
    const token = await tokenFor('oauth2.test');
    const res = await fx.client.proxy('/request', { method: 'POST', body: { form: { access_token: token, foo: 'bar' } } });
    assert.equal(upstreamForm(res).get('access_token'), token);
  });

  it('HC02 hide_credentials strips the form token and keeps the rest', async () => {
    const token = await tokenFor('oauth2_3.test');
    const res = await fx.client.proxy('/request', { host: 'oauth2_3.test', method: 'POST', body: { form: { access_token: token, foo: 'bar' } } });
    const form = upstreamForm(res);
    assert.equal(form.get('access_token'), null);
    assert.equal(form.get('foo'), 'bar');
  });

  it('HC03 without hide_credentials the query token is forwarded', async () => {
    const token = await tokenFor('oauth2.test');
    const { query } = echoed(await fx.client.proxy(`/request?access_token=${token}`));
    assert.equal(new URLSearchParams(query).get('access_token'), token);
  });

  it('HC04 hide_credentials strips the query token and keeps the rest', async () => {
    const token = await tokenFor('oauth2_3.test');
    const { query } = echoed(await fx.client.proxy(`/request?access_token=${token}&foo=bar`, { host: 'oauth2_3.test' }));
    const params = new URLSearchParams(query);
    assert.equal(params.get('access_token'), null);
    assert.equal(params.get('foo'), 'bar');
  });

  it('HC05 hide_credentials with a custom header name strips the query token', async () => {
    const token = await token1011();
    const { query } = echoed(await fx.client.proxy(`/request?access_token=${token}`, { host: 'oauth2_12.test' }));
    assert.equal(new URLSearchParams(query).get('access_token'), null);
  });

  it('HC06 without hide_credentials the authorization header is forwarded', async () => {
    const token = await tokenFor('oauth2.test');
    const { headers } = echoed(await fx.client.proxy('/request', { headers: { authorization: `bearer ${token}` } }));
    assert.equal(headers['authorization'], `bearer ${token}`);
  });

  it('HC07 hide_credentials strips the authorization header', async () => {
    const token = await tokenFor('oauth2_3.test');
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2_3.test', headers: { authorization: `bearer ${token}` } }));
    assert.equal(headers['authorization'], undefined);
  });

  it('HC08 hide_credentials strips the custom header (and there is no authorization header)', async () => {
    const token = await token1011();
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2_12.test', headers: { custom_header_name: `bearer ${token}` } }));
    assert.equal(headers['authorization'], undefined);
    assert.equal(headers['custom_header_name'], undefined);
  });

  it('HC09 hide_credentials with a multipart body', async () => {
    const token = await tokenFor('oauth2_3.test');
    const res = await fx.client.proxy(`/request?access_token=${token}`, { host: 'oauth2_3.test', method: 'POST', body: { multipart: { foo: 'bar' } } });
    assert.equal(res.status, 200, res.text);
  });

  it('HC11 hide_credentials strips a token sent in a JSON body and keeps the rest (Kong cleans only forms)', async () => {
    const token = await tokenFor('oauth2_3.test');
    const res = await fx.client.proxy('/request', { host: 'oauth2_3.test', method: 'POST', body: { json: { access_token: token, foo: 'bar', n: 1 } } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(JSON.parse(echoed(res).body), { foo: 'bar', n: 1 });
  });

  it('HC12 hide_credentials strips a token sent in a multipart body and keeps the other parts', async () => {
    const token = await tokenFor('oauth2_3.test');
    const res = await fx.client.proxy('/request', { host: 'oauth2_3.test', method: 'POST', body: { multipart: { access_token: token, foo: 'bar' } } });
    assert.equal(res.status, 200, res.text);
    const { body, headers } = echoed(res);
    const form = await new Response(body, { headers: { 'content-type': headers['content-type'] } }).formData();
    assert.equal(form.get('access_token'), null);
    assert.equal(form.get('foo'), 'bar');
    assert.ok(!body.includes(token));
  });

  it('HC10 hide_credentials keeps the other headers', async () => {
    const token = await tokenFor('oauth2_3.test');
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2_3.test', headers: { authorization: `bearer ${token}`, 'x-extra': 'kept' } }));
    assert.equal(headers['x-extra'], 'kept');
  });
});
