/** ULIDs (OpenMeter's meter ids): 48-bit time + 80 random bits, Crockford base32. */
import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function encodeBase32(bytes: Uint8Array, length: number): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < length) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out.padEnd(length, '0');
}

export function ulid(now = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time + encodeBase32(randomBytes(10), 16);
}

/** A stable ULID-shaped id for a meter declared in gateway.yaml (same key, same id). */
export function configMeterId(key: string): string {
  return stableId(`tollgate-meter:${key}`);
}

/** A ULID-shaped id that is the same wherever and whenever it is computed from the same label. */
export function stableId(label: string): string {
  const text = encodeBase32(createHash('sha256').update(label).digest(), 26);
  return '0' + text.slice(1);
}
