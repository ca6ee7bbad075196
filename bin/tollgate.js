#!/usr/bin/env -S node --max-semi-space-size=64
// The `tollgate` command of the installed package, and what npm start runs. The sources are
// TypeScript: a node's primary bundles them (bundle.js) and every process of the node runs that bundle;
// where no bundle can be written, tsx runs the sources in place. The larger young generation (the flag
// above, which only the command line can set) lets the short-lived objects of a request die young:
// fewer, cheaper garbage collections.
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { bundleSources } from './bundle.js';

/** The bundle a node's primary runs, handed to the workers it forks (they inherit its environment). */
const BUNDLE = 'TOLLGATE_BUNDLE';

// Stack traces name the TypeScript sources' files and lines, not the bundle's.
process.setSourceMapsEnabled(true);
const bundle = cluster.isPrimary ? await bundleSources() : process.env[BUNDLE];
if (bundle !== undefined && existsSync(bundle)) {
  process.env[BUNDLE] = bundle;
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
