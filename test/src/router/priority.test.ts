/** Route selection order: Kong 3.x traditional_compatible (ATC) priority, reference §2.4 and the issues of §10.1. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Route, Service } from '../../../src/config/types.ts';
import { Router, type RouteRequest } from '../../../src/router/index.ts';
import { request, route, service, uuid } from './fixtures.ts';

const upstream = service();

function winner(routes: Route[], req: Partial<RouteRequest>, services: Service[] = [upstream]): Route | undefined {
  return new Router(routes, services).match(request(req))?.route;
}

test('more matching fields beat a longer path (match_weight first)', () => {
  const hostAndRoot = route({ hosts: ['example.com'], paths: ['/'] });
  const longPathOnly = route({ paths: ['/foo/bar/baz'] });
  assert.equal(winner([longPathOnly, hostAndRoot], { path: '/foo/bar/baz' }), hostAndRoot);
});

test('plain hosts beat wildcard hosts', () => {
  const wildcard = route({ id: uuid(9), hosts: ['*.example.com'], paths: ['/'] });
  const plain = route({ id: uuid(1), hosts: ['api.example.com'], paths: ['/'] });
  assert.equal(winner([wildcard, plain], { host: 'api.example.com' }), plain);
  assert.equal(winner([wildcard, plain], { host: 'www.example.com' }), wildcard);
});

test('more headers beat fewer headers', () => {
  const oneHeader = route({ id: uuid(9), paths: ['/'], headers: { 'x-a': ['1'] } });
  const twoHeaders = route({ id: uuid(1), paths: ['/'], headers: { 'x-a': ['1'], 'x-b': ['2'] } });
  assert.equal(winner([oneHeader, twoHeaders], { headers: { 'x-a': '1', 'x-b': '2' } }), twoHeaders);
  assert.equal(winner([oneHeader, twoHeaders], { headers: { 'x-a': '1' } }), oneHeader);
});

test('a regex path beats a longer prefix path (regex bit above prefix length)', () => {
  const prefix = route({ id: uuid(9), paths: ['/users/123/profile'] });
  const regex = route({ id: uuid(1), paths: ['~/users/\\d+'] });
  assert.equal(winner([prefix, regex], { path: '/users/123/profile' }), regex);
  assert.equal(winner([prefix, regex], { path: '/users/abc' }), undefined);
});

test('regex_priority orders regex routes, whatever their ids', () => {
  const low = route({ id: uuid(9), paths: ['~/api/.*'], regex_priority: 1 });
  const high = route({ id: uuid(1), paths: ['~/api/v\\d+'], regex_priority: 5 });
  assert.equal(winner([low, high], { path: '/api/v2/x' }), high);
  const negative = route({ id: uuid(9), paths: ['~/api/v\\d+'], regex_priority: -1 });
  const zero = route({ id: uuid(1), paths: ['~/api/.*'] });
  assert.equal(winner([negative, zero], { path: '/api/v2' }), zero, 'a negative regex_priority ranks below 0');
});

test('regex_priority does not apply to prefix paths: the longest prefix wins', () => {
  const shortPreferred = route({ paths: ['/api'], regex_priority: 100 });
  const longer = route({ paths: ['/api/v1'] });
  assert.equal(winner([shortPreferred, longer], { path: '/api/v1/users' }), longer);
});

test('one more header outranks any regex_priority (Kong #14457)', () => {
  const highPriority = route({ paths: ['~/orders/\\d+'], regex_priority: 1000 });
  const withHeader = route({ paths: ['~/orders/.*'], headers: { 'x-version': ['2'] } });
  assert.equal(winner([highPriority, withHeader], { path: '/orders/7', headers: { 'x-version': '2' } }), withHeader);
  assert.equal(winner([highPriority, withHeader], { path: '/orders/7' }), highPriority);
});

test('longest prefix holds across services (Kong #10179)', () => {
  const other = service();
  const merchant = route({ hosts: ['shop.test'], paths: ['/merchant'], service: { id: upstream.id } });
  const postService = route({ hosts: ['shop.test'], paths: ['/merchant/postservice.php'], service: { id: other.id } });
  const router = new Router([merchant, postService], [upstream, other]);
  const match = router.match(request({ host: 'shop.test', path: '/merchant/postservice.php' }));
  assert.equal(match?.route, postService);
  assert.equal(match?.service, other);
  assert.equal(router.match(request({ host: 'shop.test', path: '/merchant/list' }))?.route, merchant);
});

test('a same-path route on another host does not break longest prefix (Kong #5371)', () => {
  const root = route({ paths: ['/'] });
  const api = route({ paths: ['/api'] });
  const apiOnOtherHost = route({ hosts: ['other.test'], paths: ['/api'] });
  const routes = [root, api, apiOnOtherHost];
  assert.equal(winner(routes, { host: 'example.com', path: '/api/x' }), api);
  assert.equal(winner(routes, { host: 'other.test', path: '/api/x' }), apiOnOtherHost);
  assert.equal(winner(routes, { host: 'example.com', path: '/else' }), root);
});

test('a route with several path lengths is split: each path is ranked on its own', () => {
  const split = route({ paths: ['/', '/aaaa/bbbb'] });
  const middle = route({ paths: ['/aaaa'] });
  assert.equal(winner([split, middle], { path: '/aaaa/bbbb/c' }), split);
  assert.equal(winner([split, middle], { path: '/aaaa/c' }), middle, 'the `/` group of the split route ranks below /aaaa');
  assert.equal(winner([split, middle], { path: '/zzz' }), split);
});

test('a regex among prefix paths does not make the whole route a regex route (Kong #9914)', () => {
  const mixed = route({ paths: ['/short', '~/never-matches-\\d'] });
  const longerPrefix = route({ paths: ['/short/longer'] });
  assert.equal(winner([mixed, longerPrefix], { path: '/short/longer/x' }), longerPrefix);
  assert.equal(winner([mixed, longerPrefix], { path: '/never-matches-1' }), mixed);
});

test('equal priority: the higher route id wins (ATC iterates (priority, uuid) descending)', () => {
  const lowId = route({ id: uuid(1), paths: ['/same'], created_at: 1 });
  const highId = route({ id: uuid(2), paths: ['/same'], created_at: 2 });
  assert.equal(winner([lowId, highId], { path: '/same' }), highId);
  assert.equal(winner([highId, lowId], { path: '/same' }), highId, 'declaration order does not matter');
});

test('routes of a disabled service are left out; routes without service stay', () => {
  const disabled = service({ enabled: false });
  const toDisabled = route({ paths: ['/x/y'], service: { id: disabled.id } });
  const noService = route({ paths: ['/x'] });
  const router = new Router([toDisabled, noService], [disabled]);
  const match = router.match(request({ path: '/x/y' }));
  assert.equal(match?.route, noService);
  assert.equal(match?.service, null);
});

test('protocols are not a matching criterion (the core checks them after the match)', () => {
  const httpsOnly = route({ protocols: ['https'], paths: ['/secure'] });
  assert.equal(winner([httpsOnly], { path: '/secure', scheme: 'http' }), httpsOnly);
});
