/**
 * A random key shared by the processes of one node and never written anywhere: the primary makes it
 * and hands it to each worker it starts (in its environment), a node of one process makes its own.
 * The salts of gateway.yaml's hashed secrets are keyed with it, so every process of the node derives the same hashes.
 */
import { randomBytes } from 'node:crypto';

const VARIABLE = 'TOLLGATE_NODE_SECRET';

let secret: Buffer | undefined;

export function nodeSecret(): Buffer {
  secret ??= process.env[VARIABLE] ? Buffer.from(process.env[VARIABLE], 'base64') : randomBytes(32);
  return secret;
}

/** The environment a worker needs to share this process's node secret. */
export function nodeSecretEnvironment(): Record<string, string> {
  return { [VARIABLE]: nodeSecret().toString('base64') };
}
