/**
 * The customers as usage queries by customer read them (query/customer-query.ts): billing owns the
 * customers and implements the directory (billing/customer/customers.ts).
 */

/** What a usage query needs of a customer. */
export interface UsageCustomer {
  id: string;
  key: string;
  name: string;
  /** The subjects whose events are the customer's usage. */
  subjects: string[];
}

/** The customers as billing keeps them. */
export interface CustomerDirectory {
  /** A customer by id (deleted ones too, as OpenMeter's query) or by the key of a live one. */
  find(idOrKey: string): Promise<UsageCustomer | undefined>;
  /** Every live customer. */
  live(): Promise<UsageCustomer[]>;
}
