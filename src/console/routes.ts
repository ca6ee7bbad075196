/**
 * The Tollgate console: `GET /console` on the admin listener, a page for operators that reads the admin
 * API from the browser (same origin). Its files are plain HTML, CSS and JavaScript modules from
 * `public/`, and uPlot's from node_modules; none is built, and none carries data: the page fetches
 * everything as JSON and writes it into the DOM as text. Plugins add tabs (PluginDefinition.console):
 * their sections sit between the core's Consumers and Dead letters, and their scripts are served only
 * while the plugin is in use.
 *
 * Asset URLs hold a digest of all the files (`/console/<build>/app.js`), so browsers may keep them for
 * good and a new version of the gateway is a new URL; only the page itself is revalidated.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { PACKAGE_ROOT } from '../package-root.ts';
import type { AdminReply, AdminRequest, AdminRoute, ConsoleTab, PluginRegistry } from '../pdk/types.ts';
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
    'app.js', 'api.js', 'dom.js', 'chart.js', 'traffic.js', 'consumers.js', 'dead-letters.js',
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

/** What names a plugin, a tab and a script's file in the page and its URLs: nothing to escape. */
const PLAIN_NAME = /^[a-z0-9][a-z0-9-]*$/;

/** A plugin's tab as the console serves it: `asset`, its script's name under the build (`plugins/<plugin>/<file>`). */
interface PluginTab extends ConsoleTab {
  plugin: string;
  asset: string;
}

/** The tabs of every plugin the gateway knows, in the registry's order; a malformed one stops the start. */
function pluginTabs(plugins: PluginRegistry): PluginTab[] {
  const tabs = [...plugins.values()].flatMap((plugin) =>
    (plugin.console?.tabs ?? []).map((tab) => ({ ...tab, plugin: plugin.name, asset: `plugins/${plugin.name}/${basename(tab.script)}` })),
  );
  for (const tab of tabs) {
    const file = basename(tab.script, '.js');
    if (![tab.plugin, tab.id, file].every((name) => PLAIN_NAME.test(name)) || !tab.script.endsWith('.js')) {
      throw new Error(`console tab ${tab.plugin}/${tab.id}: plugin, id and script file (${file}.js) must be lowercase letters, digits and dashes`);
    }
  }
  const assets = new Set(tabs.map((tab) => tab.asset));
  if (assets.size < tabs.length) throw new Error('console tabs: two scripts of one plugin have the same file name');
  return tabs;
}

const escapeText = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** The page of this build, with each plugin tab's link and section (its static markup) in their places. */
function pageHtml(build: string, tabs: PluginTab[]): string {
  const links = tabs.map((tab) => `<a href="#${tab.id}" data-needs="${tab.plugin}">${escapeText(tab.title)}</a>`);
  const sections = tabs.map(
    (tab) => `<section id="${tab.id}" data-needs="${tab.plugin}" data-script="/console/${build}/${tab.asset}">\n${readFileSync(tab.markup, 'utf8').trimEnd()}\n    </section>`,
  );
  // Replaced by functions: a `$` in the markup is text, not a replacement pattern.
  return readFileSync(join(PUBLIC_DIR, 'console.html'), 'utf8')
    .replace('{{tab-links}}', () => links.join('\n      '))
    .replace('{{tab-sections}}', () => sections.join('\n\n    '))
    .replaceAll('{{build}}', build);
}

/**
 * `plugins`: those the gateway knows, whose tabs the page holds (it hides those of plugins not in use);
 * `inUse`: the plugins the current configuration runs, whose scripts alone are served.
 */
export function consoleRoutes(plugins: PluginRegistry, inUse: () => readonly string[]): AdminRoute[] {
  const tabs = pluginTabs(plugins);
  const core = FILES.map(([name, path]) => [name, readFileSync(path, 'utf8')] as const);
  const scripts = tabs.map((tab) => [tab.asset, readFileSync(tab.script, 'utf8')] as const);
  const digest = createHash('sha256');
  for (const [name, body] of [...core, ...scripts]) digest.update(name).update('\0').update(body).update('\0');
  const build = digest.digest('hex').slice(0, 16);
  const assets = (contents: (readonly [string, string])[]) =>
    new Map(contents.map(([name, body]) => [name, served(body, TYPES[name.slice(name.lastIndexOf('.'))], ASSET_HEADERS)]));
  const coreAssets = assets(core);
  const pluginAssets = assets(scripts);
  const page = served(pageHtml(build, tabs), TYPES['.html'], PAGE_HEADERS);
  const answer = (req: AdminRequest, file: Served | undefined) => {
    if (req.params.build !== build || !file) throw new HttpError(404, 'Not found');
    return reply(file, req);
  };
  return [
    { method: 'GET', path: '/console', handler: (req) => reply(page, req) },
    { method: 'GET', path: '/console/:build/:file', handler: (req) => answer(req, coreAssets.get(req.params.file)) },
    {
      method: 'GET',
      path: '/console/:build/plugins/:plugin/:file',
      handler: (req) => {
        const { plugin, file } = req.params;
        return answer(req, inUse().includes(plugin) ? pluginAssets.get(`plugins/${plugin}/${file}`) : undefined);
      },
    },
  ];
}
