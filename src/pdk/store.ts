/** The store's compare-and-set helpers and the reads that run where its data is. */
export { putIfAbsent, take } from '../store/store.ts';
export { registerStoreProcedures } from '../store/procedures.ts';
