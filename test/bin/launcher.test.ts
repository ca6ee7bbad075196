/**
 * bin/tollgate.js on a copy of the package: the processes of a node run one bundle of the sources,
 * built again as soon as a source changed (never stale), reused while none did, and tsx runs the
 * sources when no bundle can be written.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { before, test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let copy = '';

before(() => {
  copy = tempDir('tollgate-launcher-');
  for (const entry of ['bin', 'src', 'plugins', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, entry), join(copy, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
});

function tollgate(...args: string[]): { status: number | null; out: string } {
  const run = spawnSync(process.execPath, [join(copy, 'bin/tollgate.js'), ...args], { cwd: copy, encoding: 'utf8' });
  return { status: run.status, out: run.stdout + run.stderr };
}

/** Puts `line` first in src/cli.ts (its last line exits). */
function prepend(line: string): void {
  const cli = join(copy, 'src/cli.ts');
  writeFileSync(cli, `${line}\n${readFileSync(cli, 'utf8')}`);
}

const bundles = () => readdirSync(join(copy, 'dist')).filter((f) => /^tollgate-[0-9a-f]{16}\.mjs$/.test(f));

test('the first start builds a bundle; later ones reuse it; a changed source is built again and run', () => {
  assert.equal(tollgate('help').status, 0);
  assert.equal(bundles().length, 1);
  const [first] = bundles();
  // A build rewrites the manifest (the same sources would give a bundle of the same name).
  const built = statSync(join(copy, 'dist/manifest.json')).mtimeMs;
  assert.equal(tollgate('help').status, 0);
  assert.deepEqual(bundles(), [first]);
  assert.equal(statSync(join(copy, 'dist/manifest.json')).mtimeMs, built, 'nothing changed: not built again');

  prepend("console.error('edited after the first build');");
  const edited = tollgate('help');
  assert.equal(edited.status, 0);
  assert.match(edited.out, /edited after the first build/, 'the change runs at once');
  assert.equal(bundles().length, 2);
});

test('a source that no longer builds is reported as tsx reports it, not run from an older bundle', () => {
  writeFileSync(join(copy, 'src/broken.ts'), 'export const x = ;\n');
  prepend("import './broken.ts';");
  const run = tollgate('help');
  assert.notEqual(run.status, 0);
  assert.match(run.out, /broken\.ts/);
});

test('where dist/ cannot be written, the sources run through tsx', () => {
  rmSync(join(copy, 'src/broken.ts'));
  cpSync(join(ROOT, 'src/cli.ts'), join(copy, 'src/cli.ts'));
  prepend("console.error('run without a bundle');");
  rmSync(join(copy, 'dist'), { recursive: true });
  // A file where the folder should be: no bundle can be written (file modes would not stop root).
  writeFileSync(join(copy, 'dist'), '');
  const run = tollgate('help');
  assert.equal(run.status, 0);
  assert.match(run.out, /run without a bundle/);
});
