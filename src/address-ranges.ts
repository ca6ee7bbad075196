/** Sets of IP addresses and CIDR ranges (`trusted_ips`, loopback), and the peer address they are checked against. */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

export class AddressRanges {
  private readonly list = new BlockList();
  private readonly empty: boolean;

  /** Addresses and CIDR ranges, IPv4 or IPv6 (checked at config load). */
  constructor(cidrs: string[]) {
    this.empty = cidrs.length === 0;
    for (const cidr of cidrs) {
      const [address, bits] = cidr.split('/');
      const type = isIPv6(address) ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.list.addAddress(address, type);
      else this.list.addSubnet(address, Number(bits), type);
    }
  }

  has(ip: string): boolean {
    if (this.empty) return false;
    if (isIPv4(ip)) return this.list.check(ip, 'ipv4');
    if (isIPv6(ip)) return this.list.check(ip, 'ipv6');
    return false;
  }
}

/** The peer's address without the IPv4-mapped IPv6 prefix. */
export function peerAddress(remote: string | undefined): string {
  if (!remote) return '';
  return remote.startsWith('::ffff:') ? remote.slice(7) : remote;
}
