/** TLS material for `ssl` listeners: the configured PEM pair, or a self-signed one generated once. */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import selfsigned from 'selfsigned';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from './data-dir.ts';

export interface TlsMaterial {
  cert: string;
  key: string;
}

const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000;

export async function loadTlsMaterial(cert: string | null, key: string | null, dataDir: string): Promise<TlsMaterial> {
  if (cert && key) return { cert: await readFile(cert, 'utf8'), key: await readFile(key, 'utf8') };
  const dir = join(dataDir, 'tls');
  const certFile = join(dir, 'gateway.crt');
  const keyFile = join(dir, 'gateway.key');
  try {
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  } catch {
    // Not generated yet.
  }
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + TEN_YEARS_MS),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
    ],
  });
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  await writeFile(keyFile, pems.private, { mode: PRIVATE_FILE_MODE });
  await writeFile(certFile, pems.cert, { mode: PRIVATE_FILE_MODE });
  return { cert: pems.cert, key: pems.private };
}
