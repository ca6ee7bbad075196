// Guard rails, not style: no import cycles, plugins reach the core only through the PDK and each other
// only through a `public.ts`, and those of typescript-eslint's recommended rules the code already keeps.
// Parsing only (no type information), so that a run takes seconds.
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import * as typeImportsAsValues from './eslint-parser.js';
import { readdirSync } from 'node:fs';

const PLUGINS = readdirSync('plugins', { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);

/** A plugin's own folder, and of every other plugin its `public.ts` only. */
const pluginDoors = PLUGINS.map((plugin) => ({
  target: `./plugins/${plugin}`,
  from: './plugins',
  except: [`./${plugin}`, ...PLUGINS.filter((other) => other !== plugin).map((other) => `./${other}/public.ts`)],
  message: 'A plugin reaches another plugin only through its public.ts.',
}));

/**
 * Domains behind ports (plugins/metering, and billing inside it): outside a domain's folder only its
 * `port.ts` may be imported; `shared/` (and metering's `storage/`) are free to every domain and import
 * none; a domain imports neither the composition at the top (service.ts, handler.ts, ...) nor an HTTP
 * mapping. `mounted` names a domain's folders the composition may import besides the port.
 */
function domainZones(root, { domains, free, mounted = {} }) {
  const entries = readdirSync(root);
  const path = (entry) => `./${root}/${entry}`;
  const composition = entries.filter((entry) => !domains.includes(entry) && !free.includes(entry));
  return [
    ...domains.map((domain) => ({
      target: entries.filter((entry) => entry !== domain).map(path),
      from: path(domain),
      except: ['./port.ts', ...(mounted[domain] ?? [])],
      message: `Outside ${root}/${domain}/, import only its port.ts.`,
    })),
    {
      target: domains.flatMap((domain) => (mounted[domain] ? withoutMounted(`${root}/${domain}`, mounted[domain]) : [path(domain)])),
      from: composition.map(path),
      message: 'A domain imports neither the composition at the top nor an HTTP mapping.',
    },
    {
      target: free.map(path),
      from: entries.filter((entry) => !free.includes(entry)).map(path),
      message: `Nothing in ${free.map((entry) => `${root}/${entry}/`).join(' or ')} imports a domain.`,
    },
  ];
}

/** A folder's entries but the mounted ones (an HTTP mapping inside a domain may import the plugin's). */
function withoutMounted(folder, mounted) {
  return readdirSync(folder).filter((entry) => !mounted.includes(`./${entry}`)).map((entry) => `./${folder}/${entry}`);
}

const meteringDomains = [
  ...domainZones('plugins/metering', {
    domains: ['meter', 'ingest', 'aggregation', 'query', 'billing', 'notification'],
    free: ['shared', 'storage'],
    mounted: { billing: ['./http'] },
  }),
  ...domainZones('plugins/metering/billing', {
    domains: ['customer', 'productcatalog', 'subscription', 'invoice', 'entitlement'],
    free: ['shared'],
  }),
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.scratch/', 'bench/peers/'] },
  tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parser: typeImportsAsValues },
  },
  {
    plugins: { 'import-x': importX },
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/resolver-next': [createNodeResolver()],
    },
    rules: {
      // Type imports count: a cycle of types still ties the modules' meaning together.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Code lines stay readable (prettier's printWidth is 120; 160 leaves room for a long call that reads
      // better whole); comments, strings and patterns may run longer.
      'max-len': [
        'error',
        { code: 160, ignoreComments: true, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true },
      ],
      // Recommended rules the code does not keep: this config adds guard rails, not a clean-up.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': 'off',
      '@typescript-eslint/no-require-imports': 'off',
      '@typescript-eslint/no-unused-expressions': 'off',
      '@typescript-eslint/no-empty-object-type': 'off',
      'prefer-const': 'off',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: './src',
              from: './src/pdk/index.ts',
              message: 'The core imports the module that defines a name, or the plugin types from src/pdk/types.ts.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['plugins/**/*.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: './plugins',
              from: './src',
              except: ['./pdk/index.ts'],
              message: 'A plugin reaches the core only through src/pdk/index.ts.',
            },
            ...pluginDoors,
            ...meteringDomains,
          ],
        },
      ],
    },
  },
);
