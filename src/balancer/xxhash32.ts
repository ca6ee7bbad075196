/**
 * xxHash32 (seed 0) of a string's UTF-8 bytes: the hash Kong's consistent-hashing balancer places
 * targets and request values with (luaxxhash in kong/runloop/balancer/consistent_hashing.lua), so the
 * same value lands on the same target as it would on Kong. Algorithm: github.com/Cyan4973/xxHash,
 * doc/xxhash_spec.md.
 */
const PRIME1 = 0x9e3779b1;
const PRIME2 = 0x85ebca77;
const PRIME3 = 0xc2b2ae3d;
const PRIME4 = 0x27d4eb2f;
const PRIME5 = 0x165667b1;

const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));
const round = (acc: number, lane: number) => Math.imul(rotl((acc + Math.imul(lane, PRIME2)) | 0, 13), PRIME1);
const u32 = (b: Uint8Array, i: number) => b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24);

export function xxhash32(text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  const length = bytes.length;
  let i = 0;
  let acc: number;
  if (length >= 16) {
    let v1 = (PRIME1 + PRIME2) | 0;
    let v2 = PRIME2;
    let v3 = 0;
    let v4 = -PRIME1 | 0;
    for (; i + 16 <= length; i += 16) {
      v1 = round(v1, u32(bytes, i));
      v2 = round(v2, u32(bytes, i + 4));
      v3 = round(v3, u32(bytes, i + 8));
      v4 = round(v4, u32(bytes, i + 12));
    }
    acc = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    acc = PRIME5;
  }
  acc = (acc + length) | 0;
  for (; i + 4 <= length; i += 4) acc = Math.imul(rotl((acc + Math.imul(u32(bytes, i), PRIME3)) | 0, 17), PRIME4);
  for (; i < length; i++) acc = Math.imul(rotl((acc + Math.imul(bytes[i], PRIME5)) | 0, 11), PRIME1);
  acc ^= acc >>> 15;
  acc = Math.imul(acc, PRIME2);
  acc ^= acc >>> 13;
  acc = Math.imul(acc, PRIME3);
  acc ^= acc >>> 16;
  return acc >>> 0;
}
