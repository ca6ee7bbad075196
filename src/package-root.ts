/**
 * The package's root folder (the one holding package.json), found from where this code runs: a module
 * under src/ when tsx runs the sources, dist/ when the bundle runs (bin/bundle.js). Files the gateway
 * reads from the package are named from here, never from import.meta of the module that reads them.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

function rootAbove(dir: string): string {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, 'package.json'))) return at;
    if (dirname(at) === at) throw new Error(`no package.json above ${dir}`);
  }
}

export const PACKAGE_ROOT = rootAbove(import.meta.dirname);
