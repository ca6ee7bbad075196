/**
 * The node's id (`GET /`, the `source` of request-metering events): one per node, kept across
 * restarts in `data_dir/node_id` as Kong keeps its in `kong.id`. Every worker process of a node reads
 * the same file; nodes sharing one database each have their own data directory, hence their own id.
 */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The id in `dataDir`, created on first use: `earlier` offers one kept elsewhere before (the embedded
 * store held it), so an upgraded node keeps its id. Processes starting together agree on one.
 */
export async function nodeIdOf(dataDir: string, earlier: () => Promise<string | undefined> = async () => undefined): Promise<string> {
  const file = join(dataDir, 'node_id');
  const existing = await readId(file);
  if (existing) return existing;
  const previous = await earlier();
  const id = previous && UUID.test(previous) ? previous : randomUUID();
  try {
    await writeFile(file, id + '\n', { flag: 'wx' });
    return id;
  } catch (err) {
    // Another process of this node wrote it first: that one is the node's id.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return (await readId(file)) ?? id;
    throw err;
  }
}

async function readId(file: string): Promise<string | undefined> {
  try {
    const text = (await readFile(file, 'utf8')).trim();
    return UUID.test(text) ? text : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
