/**
 * GET /console over plain HTTP: the page and its files as the admin listener serves them. The page
 * carries a strict Content-Security-Policy (same-origin scripts only, Trusted Types) and no inline code;
 * its modules and uPlot come from the package itself under a build digest, cached for good, revalidated
 * by ETag; nothing outside that list is served. What the page shows is tested in Chromium (browser.test.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';

let gw: TestGateway;
let html: string;

before(async () => {
  gw = await startGateway({ routes: [{ name: 'plain', paths: ['/plain'] }] });
  html = (await request(`${gw.admin}/console`)).text;
});
after(() => gw?.stop());

const admin = (path: string, headers: Record<string, string> = {}) => request(gw.admin + path, { headers });

/** The files the page names (stylesheets, icon, the entry module). */
const referenced = () => [...html.matchAll(/(?:src|href)="(\/console\/[^"]+)"/g)].map((m) => m[1]);
/** Where the page's files are: `/console/<build digest>/`. */
const filesDir = () => /\/console\/[0-9a-f]{16}\//.exec(html)![0];

test('the page: HTML with a strict CSP and the usual protections, revalidated by ETag', async () => {
  const page = await admin('/console');
  assert.equal(page.status, 200);
  assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
  const csp = String(page.headers['content-security-policy']);
  for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"]) {
    assert.ok(csp.split('; ').includes(directive), `${directive} in ${csp}`);
  }
  assert.doesNotMatch(csp, /unsafe|data:|\*/);
  assert.equal(page.headers['x-frame-options'], 'DENY');
  assert.equal(page.headers['x-content-type-options'], 'nosniff');
  assert.equal(page.headers['referrer-policy'], 'no-referrer');
  assert.equal(page.headers['cache-control'], 'no-cache');
  const again = await admin('/console', { 'if-none-match': String(page.headers.etag) });
  assert.equal(again.status, 304);
  assert.equal(again.body.length, 0);
});

test('no inline code in the page: scripts by src, no style attributes, no event handler attributes', () => {
  for (const tag of html.match(/<script\b[^>]*>/g) ?? []) assert.match(tag, /\bsrc="\/console\//, tag);
  assert.match(html, /<script type="module" src="\/console\/[0-9a-f]{16}\/app\.js"><\/script>/);
  assert.doesNotMatch(html, /<script\b[^>]*>[^<]+<\/script>/);
  assert.doesNotMatch(html, /\sstyle=|<style\b/);
  assert.doesNotMatch(html, /\son[a-z]+=/i);
});

test('every file the page and its modules load is served, typed, cached for good and revalidated by ETag', async () => {
  const seen = new Set<string>();
  const pending = referenced();
  while (pending.length) {
    const path = pending.pop()!;
    if (seen.has(path)) continue;
    seen.add(path);
    const file = await admin(path);
    assert.equal(file.status, 200, path);
    assert.equal(file.headers['cache-control'], 'private, max-age=31536000, immutable', path);
    assert.equal(file.headers['x-content-type-options'], 'nosniff');
    const type = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml' }[path.split('.').pop()!];
    assert.equal(file.headers['content-type'], type, path);
    assert.equal((await admin(path, { 'if-none-match': `W/${file.headers.etag}` })).status, 304, path);
    if (path.endsWith('.js')) {
      // Static and dynamic imports of the module, relative to it.
      for (const m of file.text.matchAll(/(?:from|import\()\s*'(\.\/[^']+)'/g)) pending.push(new URL(m[1], `http://x${path}`).pathname);
    }
  }
  const names = [...seen].map((p) => p.split('/').pop()).sort();
  assert.deepEqual(names, [
    'api.js', 'app.js', 'billing.js', 'chart.js', 'console.css', 'consumers.js', 'dead-letters.js', 'dom.js', 'favicon.svg', 'metering.js',
    'traffic.js', 'uPlot.esm.js', 'uPlot.min.css', 'usage.js',
  ]);
});

test('uPlot comes from the installed package, not a copy or a CDN', async () => {
  const dist = join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist');
  assert.equal((await admin(`${filesDir()}uPlot.esm.js`)).text, readFileSync(join(dist, 'uPlot.esm.js'), 'utf8'));
  assert.equal((await admin(`${filesDir()}uPlot.min.css`)).text, readFileSync(join(dist, 'uPlot.min.css'), 'utf8'));
  assert.doesNotMatch(html, /https?:\/\//, 'the page loads nothing from elsewhere');
});

test('nothing else is served: another build, another file name, a path out of the folder', async () => {
  for (const path of ['/console/0000000000000000/app.js', `${filesDir()}routes.ts`, `${filesDir()}..%2F..%2Fpackage.json`, `${filesDir()}console.html`]) {
    assert.equal((await admin(path)).status, 404, path);
  }
});

test('the modules never turn strings into markup', async () => {
  for (const name of ['app.js', 'api.js', 'dom.js', 'chart.js', 'traffic.js', 'consumers.js', 'usage.js', 'billing.js', 'metering.js', 'dead-letters.js']) {
    const source = (await admin(filesDir() + name)).text;
    assert.doesNotMatch(source, /\.(?:innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write|\beval\(|new Function/, name);
  }
});
