/**
 * The docs' shell blocks as test/docs/paste.ts reads them, and the first share of the documents run
 * as pasted (docs-paste-*.test.ts run the others).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backgroundCommands, shellBlocks } from '../helpers/doc-blocks.ts';
import { blocksOf, DOCUMENTS, FLAGS, mapPorts, pasteTests, PASTE_SHARDS } from './paste.ts';

test('shell blocks: sh, bash and shell fences with their flags, other languages left out', () => {
  const markdown = ['# t', '```sh', 'echo 1', '```', '```yaml', 'a: 1', '```', '````bash background', 'npm start', '````', '```shell no-run', 'npm test', '```', '```', 'x', '```'].join('\n');
  assert.deepEqual(shellBlocks(markdown, 'T.md'), [
    { file: 'T.md', line: 2, flags: [], code: 'echo 1\n' },
    { file: 'T.md', line: 8, flags: ['background'], code: 'npm start\n' },
    { file: 'T.md', line: 11, flags: ['no-run'], code: 'npm test\n' },
  ]);
  assert.deepEqual(backgroundCommands({ file: 'T.md', line: 1, flags: ['background'], code: '# 1. the upstream\nnpm run example:upstream\n\nnpm start\n' }), ['npm run example:upstream', 'npm start']);
});

test('every shell block of the docs uses known flags, and the documented ports are mapped everywhere they appear', () => {
  for (const document of DOCUMENTS) {
    for (const block of blocksOf(document)) for (const flag of block.flags) assert.ok(FLAGS.has(flag), `${document}:${block.line}: unknown flag '${flag}'`);
  }
  const mapped = mapPorts(
    'curl https://127.0.0.1:8443/x http://localhost:8001/ PORT ?? 3000) 127.0.0.1:84430 PORT=3000 npm --resolve a.test:8443:127.0.0.1 port: 3000 ldap_port: 3000',
    new Map([[8443, 1], [8001, 2], [3000, 3]]),
  );
  assert.equal(mapped, 'curl https://127.0.0.1:1/x http://localhost:2/ PORT ?? 3) 127.0.0.1:84430 PORT=3 npm --resolve a.test:1:127.0.0.1 port: 3 ldap_port: 3');
});

pasteTests(0, PASTE_SHARDS);
