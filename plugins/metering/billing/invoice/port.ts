/** The invoice domain's port, for billing's composition (the facade and the scheduler). */
export { InvoiceService } from './invoices.ts';
export type { Invoice, InvoiceKind } from './invoices.ts';
