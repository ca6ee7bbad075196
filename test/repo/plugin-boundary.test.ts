/**
 * The plugin boundary: a plugin reaches the core only through src/pdk/index.ts (the PDK, which
 * re-exports what plugins use of the toolkit and the core), never another core module, so that the core can change behind that one interface; and
 * another plugin only through that plugin's public.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

test('plugins import nothing of src/ but the PDK', () => {
  const leaks: string[] = [];
  for (const file of sources(join(root, 'plugins'))) {
    for (const [, target] of readFileSync(file, 'utf8').matchAll(/from\s+'([^']+)'/g)) {
      if (!target.startsWith('.')) continue;
      const imported = relative(root, resolve(file, '..', target));
      if (imported.startsWith('src/') && imported !== 'src/pdk/index.ts') leaks.push(`${relative(root, file)} imports ${imported}`);
    }
  }
  assert.deepEqual(leaks, []);
});

test('plugins import nothing of another plugin but its public.ts', () => {
  const leaks: string[] = [];
  for (const file of sources(join(root, 'plugins'))) {
    const own = relative(join(root, 'plugins'), file).split('/')[0];
    for (const [, target] of readFileSync(file, 'utf8').matchAll(/from\s+'([^']+)'/g)) {
      if (!target.startsWith('.')) continue;
      const imported = relative(join(root, 'plugins'), resolve(file, '..', target));
      const [plugin, ...rest] = imported.split('/');
      if (!imported.startsWith('..') && plugin !== own && rest.join('/') !== 'public.ts') leaks.push(`${relative(root, file)} imports plugins/${imported}`);
    }
  }
  assert.deepEqual(leaks, []);
});
