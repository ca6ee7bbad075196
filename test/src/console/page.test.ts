/**
 * GET /console over plain HTTP: the page and its files as the admin listener serves them. The page
 * carries a strict Content-Security-Policy (same-origin scripts only, Trusted Types) and no inline code;
 * its modules and uPlot come from the package itself under a build digest, cached for good, revalidated
 * by ETag; nothing outside that list is served. A plugin's tabs (metering's) are in the page, their
 * scripts served from the plugin's folder under the same build, and only while the plugin is in use.
 * What the page shows is tested in Chromium (browser.test.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';

let gw: TestGateway;
let html: string;

const METERING_ROUTE = { name: 'metering', paths: ['/v3/metering'], plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] };

before(async () => {
  gw = await startGateway({ routes: [{ name: 'plain', paths: ['/plain'] }, METERING_ROUTE] });
  html = (await request(`${gw.admin}/console`)).text;
});
after(() => gw?.stop());

const admin = (path: string, headers: Record<string, string> = {}) => request(gw.admin + path, { headers });

/** The files the page names (stylesheets, icon, the entry module, the plugin tabs' modules). */
const referenced = () => [...html.matchAll(/(?:src|href|data-script)="(\/console\/[^"]+)"/g)].map((m) => m[1]);
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
      for (const m of file.text.matchAll(/(?:from|import\()\s*'(\.\.?\/[^']+)'/g)) pending.push(new URL(m[1], `http://x${path}`).pathname);
    }
  }
  const names = [...seen].map((p) => p.slice(filesDir().length)).sort();
  assert.deepEqual(names, [
    'api.js', 'app.js', 'chart.js', 'console.css', 'consumers.js', 'dead-letters.js', 'dom.js', 'favicon.svg',
    'plugins/metering/billing.js', 'plugins/metering/metering.js', 'plugins/metering/usage.js',
    'traffic.js', 'uPlot.esm.js', 'uPlot.min.css',
  ]);
});

test('uPlot comes from the installed package, not a copy or a CDN', async () => {
  const dist = join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist');
  assert.equal((await admin(`${filesDir()}uPlot.esm.js`)).text, readFileSync(join(dist, 'uPlot.esm.js'), 'utf8'));
  assert.equal((await admin(`${filesDir()}uPlot.min.css`)).text, readFileSync(join(dist, 'uPlot.min.css'), 'utf8'));
  assert.doesNotMatch(html, /https?:\/\//, 'the page loads nothing from elsewhere');
});

test('nothing else is served: another build, another file name, a path out of the folder', async () => {
  const plugin = `${filesDir()}plugins/metering/`;
  for (const path of [
    '/console/0000000000000000/app.js', `${filesDir()}routes.ts`, `${filesDir()}..%2F..%2Fpackage.json`, `${filesDir()}console.html`,
    '/console/0000000000000000/plugins/metering/usage.js', `${plugin}usage.html`, `${plugin}index.ts`, `${plugin}..%2Findex.ts`, `${plugin}..%2F..%2F..%2Fpackage.json`,
    `${filesDir()}plugins%2Fmetering%2Fusage.js`, `${filesDir()}plugins/acl/usage.js`, `${filesDir()}plugins/metering/api.js`,
  ]) {
    assert.equal((await admin(path)).status, 404, path);
  }
});

test('the modules never turn strings into markup', async () => {
  const tabs = ['usage.js', 'billing.js', 'metering.js'].map((name) => `plugins/metering/${name}`);
  for (const name of ['app.js', 'api.js', 'dom.js', 'chart.js', 'traffic.js', 'consumers.js', ...tabs, 'dead-letters.js']) {
    const source = (await admin(filesDir() + name)).text;
    assert.doesNotMatch(source, /\.(?:innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write|\beval\(|new Function/, name);
  }
});

test("metering's tabs sit between Consumers and Dead letters, each section marked with its plugin and its module", () => {
  const links = [...html.matchAll(/<a href="#([^"]+)"(?: data-needs="([^"]+)")?>/g)].map((m) => `${m[1]}${m[2] ? ` (${m[2]})` : ''}`);
  assert.deepEqual(links, ['traffic', 'consumers', 'usage (metering)', 'billing (metering)', 'metering (metering)', 'dead-letters']);
  for (const id of ['usage', 'billing', 'metering']) {
    assert.match(html, new RegExp(`<section id="${id}" data-needs="metering" data-script="/console/[0-9a-f]{16}/plugins/metering/${id}\\.js">`));
  }
  assert.match(html, /<form id="usage-form" class="controls">/);
});

test('a plugin not in use: its tabs are in the page (hidden there), its scripts are not served', async () => {
  const plain = await startGateway({ routes: [{ name: 'plain', paths: ['/plain'] }] });
  try {
    const page = (await request(`${plain.admin}/console`)).text;
    const script = /data-script="(\/console\/[0-9a-f]{16}\/plugins\/metering\/usage\.js)"/.exec(page)![1];
    assert.equal((await request(plain.admin + script)).status, 404);
    assert.equal((await request(plain.admin + script.replace(/plugins\/metering\/usage\.js$/, 'app.js'))).status, 200);
  } finally {
    await plain.stop();
  }
});
