/**
 * The PDK's surface: named exports only, and every value it exports is used by a plugin, so that what
 * the core promises plugins stays what they need (a name no plugin uses goes, or a plugin uses it).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import * as pdk from '../../../src/pdk/index.ts';

const root = resolve(import.meta.dirname, '../../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

test('no file of the PDK re-exports a module whole', () => {
  const wholesale = sources(join(root, 'src/pdk')).filter((file) => /export \*/.test(readFileSync(file, 'utf8')));
  assert.deepEqual(wholesale, []);
});

test('every value the PDK exports is imported by a plugin', () => {
  const imported = new Set<string>();
  for (const file of sources(join(root, 'plugins'))) {
    for (const [, names] of readFileSync(file, 'utf8').matchAll(/import\s*\{([^}]*)\}\s*from\s*'[./]*src\/pdk\/index\.ts'/g)) {
      for (const name of names.split(',')) imported.add(name.trim().split(/\s+as\s+/)[0]);
    }
  }
  const unused = Object.keys(pdk).filter((name) => !imported.has(name));
  assert.deepEqual(unused, []);
});
