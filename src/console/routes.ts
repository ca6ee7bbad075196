/**
 * The Tollgate console: `GET /console` on the admin listener, a page for operators that reads the admin
 * API from the browser (same origin). Its files are plain HTML, CSS and JavaScript modules from
 * `public/`, and uPlot's from node_modules; none is built, and none carries data: the page fetches
 * everything as JSON and writes it into the DOM as text.
 *
 * Asset URLs hold a digest of all the files (`/console/<build>/app.js`), so browsers may keep them for
 * good and a new version of the gateway is a new URL; only the page itself is revalidated.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { PACKAGE_ROOT } from '../package-root.ts';
import type { AdminReply, AdminRequest, AdminRoute } from '../pdk/types.ts';
import { HttpError } from '../pipeline/http-error.ts';

const PUBLIC_DIR = join(PACKAGE_ROOT, 'src/console/public');
const UPLOT_DIST = join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The page's own modules and styles, then uPlot's (served under the names the modules import). */
const FILES: [name: string, path: string][] = [
  ...[
    'app.js', 'api.js', 'dom.js', 'chart.js', 'traffic.js', 'consumers.js', 'usage.js', 'billing.js', 'metering.js', 'dead-letters.js',
    'console.css', 'favicon.svg',
  ].map((name): [string, string] => [name, join(PUBLIC_DIR, name)]),
  ['uPlot.esm.js', join(UPLOT_DIST, 'uPlot.esm.js')],
  ['uPlot.min.css', join(UPLOT_DIST, 'uPlot.min.css')],
];

/**
 * Scripts and styles from this origin only, no inline code, no plugins or frames, requests only to the
 * admin API itself; Trusted Types make any string assigned as HTML (innerHTML and friends) throw, so
 * data from users cannot become markup even through a mistake in a later change.
 */
const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/** On every file, the page's policy too: an asset opened on its own (the SVG icon) is a document as well. */
const COMMON_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'cross-origin-resource-policy': 'same-origin',
};

const PAGE_HEADERS = {
  ...COMMON_HEADERS,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  // The page is cheap to revalidate (ETag) and names the build its assets belong to.
  'cache-control': 'no-cache',
};

const ASSET_HEADERS = { ...COMMON_HEADERS, 'cache-control': 'private, max-age=31536000, immutable' };

interface Served {
  body: string;
  etag: string;
  headers: Record<string, string>;
}

function served(body: string, type: string, headers: Record<string, string>): Served {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  return { body, etag, headers: { ...headers, 'content-type': type, etag } };
}

/** 304 when the browser holds this version already (If-None-Match, RFC 9110 §13.1.2). */
function reply(file: Served, req: AdminRequest): AdminReply {
  const held = String(req.headers['if-none-match'] ?? '').split(',').map((tag) => tag.trim().replace(/^W\//, ''));
  if (held.includes(file.etag) || held.includes('*')) return { status: 304, headers: file.headers };
  return { status: 200, body: file.body, headers: file.headers };
}

export function consoleRoutes(): AdminRoute[] {
  const contents = FILES.map(([name, path]) => [name, readFileSync(path, 'utf8')] as const);
  const digest = createHash('sha256');
  for (const [name, body] of contents) digest.update(name).update('\0').update(body).update('\0');
  const build = digest.digest('hex').slice(0, 16);
  const assets = new Map(contents.map(([name, body]) => [name, served(body, TYPES[name.slice(name.lastIndexOf('.'))], ASSET_HEADERS)]));
  const page = served(readFileSync(join(PUBLIC_DIR, 'console.html'), 'utf8').replaceAll('{{build}}', build), TYPES['.html'], PAGE_HEADERS);
  return [
    { method: 'GET', path: '/console', handler: (req) => reply(page, req) },
    {
      method: 'GET',
      path: '/console/:build/:file',
      handler: (req) => {
        const asset = req.params.build === build ? assets.get(req.params.file) : undefined;
        if (!asset) throw new HttpError(404, 'Not found');
        return reply(asset, req);
      },
    },
  ];
}
