/** A plugin's entity listings: Kong's paging (the core keeps and serves entities declared `keptByCore`). */
export { page, pageSize } from '../toolkit/paging.ts';
